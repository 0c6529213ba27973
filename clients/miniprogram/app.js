// The API's base URL: the stack's ApiDomainName (its ApiUrl output), an ICP-filed domain on the mini-program's request-domain list (docs/china.md).
App({ globalData: { apiBase: "https://api.example.cn" } });
