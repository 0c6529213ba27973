// apiBase: the stack's ApiUrl output (its ApiDomainName: an ICP-filed domain, docs/china.md). loginUrl: your login
// service, which trades wx.login's code for a token the API's JWT authorizer accepts (empty: the API has no
// authorizer, JwtIssuer unset). Both domains go on the mini-program's request-domain list, and the picture's host
// on its downloadFile list (docs/client.md, "A sample mini-program").
App({ globalData: { apiBase: "https://api.example.cn", loginUrl: "https://login.example.cn/wechat/login" } });
