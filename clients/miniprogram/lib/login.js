// The sign-in behind the client's getToken: wx.login gives a one-time code, your login service trades it
// (with WeChat's code2Session, server side) for a token of your own, and the token is kept in storage until
// the API refuses it. Your service's domain goes on the request-domain list beside the API's (docs/client.md).
const STORAGE_KEY = "chuixiang.token";

/** `wx.login` as a promise of its code. */
function wxCode(wx) {
  return new Promise((resolve, reject) => {
    wx.login({
      success: (r) => (r && r.code ? resolve(r.code) : reject(new Error("wx.login gave no code"))),
      fail: (e) => reject(new Error((e && e.errMsg) || "wx.login failed")),
    });
  });
}

/** POST the code to the login service; its answer `{token}` is the bearer token the API's JWT authorizer checks. */
function trade(wx, loginUrl, code) {
  return new Promise((resolve, reject) => {
    wx.request({
      url: loginUrl,
      method: "POST",
      header: { "content-type": "application/json" },
      data: JSON.stringify({ code }),
      timeout: 10000,
      success: (r) => {
        const token = r && Number(r.statusCode) === 200 && r.data && r.data.token;
        return token ? resolve(String(token)) : reject(new Error(`login service answered ${r && r.statusCode}`));
      },
      fail: (e) => reject(new Error((e && e.errMsg) || "login service unreachable")),
    });
  });
}

/**
 * The client's `getToken`: the stored token, unless the API refused it (`forceRefresh`) or there is none; then a
 * new sign-in. A sign-in that fails rejects, and the client ends the job UNAUTHORIZED without sending it.
 * One sign-in at a time: concurrent calls share it.
 */
function loginTokens(wx, loginUrl) {
  let pending = null;
  return function getToken(options) {
    const stored = wx.getStorageSync(STORAGE_KEY);
    if (stored && !(options && options.forceRefresh)) return Promise.resolve(stored);
    if (!pending) {
      wx.removeStorageSync(STORAGE_KEY);
      pending = wxCode(wx)
        .then((code) => trade(wx, loginUrl, code))
        .then((token) => {
          wx.setStorageSync(STORAGE_KEY, token);
          return token;
        })
        .finally(() => {
          pending = null;
        });
    }
    return pending;
  };
}

module.exports = { loginTokens, STORAGE_KEY };
