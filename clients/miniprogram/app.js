// The API's base URL: an ICP-filed domain on the mini-program's request-domain list (docs/first-deploy.md, China).
App({ globalData: { apiBase: "https://api.example.cn" } });
