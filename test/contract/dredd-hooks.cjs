// Dredd hooks for test/contract/dredd.test.ts: only what Dredd cannot do by itself, each saying which.
const { readFileSync } = require("node:fs");
const path = require("node:path");
const hooks = require("hooks");
const { parse } = require("yaml");

const openapi = parse(readFileSync(path.join(__dirname, "../../generated/openapi/openapi-3.0.yaml"), "utf8"));
let token = "";

// Dredd has no OAuth 2.0 support: it cannot run the client-credentials grant the API's security scheme
// names, so a token is fetched once, with the demo client of the reference server's default configuration.
hooks.beforeAll(async (transactions, done) => {
  const { protocol, host, port } = transactions[0];
  const response = await fetch(`${protocol}//${host}:${port}/oauth2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: "partner-acme", client_secret: "s3cr3t-acme-2026" }),
  });
  token = (await response.json()).access_token;
  done();
});

hooks.beforeEach((transaction, done) => {
  const status = Number(transaction.expected.statusCode);
  const { uri, method } = transaction.request;
  const route = uri.split("?")[0];
  const oauth = route === "/oauth2/token";
  if (status === 401 && !oauth) {
    // Sent as described, with no token: the API answers 401, which is what this transaction expects.
  } else if (status >= 200 && status < 300) {
    if (!oauth) transaction.request.headers.Authorization = `Bearer ${token}`;
    // Dredd sends request examples of JSON media types only ("'examples' is only supported for JSON
    // media types"): a form-encoded body gets the operation's first example, encoded as the form it is.
    const content = openapi.paths[route][method.toLowerCase()].requestBody?.content ?? {};
    const form = content["application/x-www-form-urlencoded"];
    if (form) transaction.request.body = new URLSearchParams(Object.values(form.examples)[0].value).toString();
  } else {
    // Dredd sends one request per operation (the first example; it ignores the others) whatever status a
    // transaction expects, so it cannot provoke an error answer such as 403, 413 or 429 (or the token
    // endpoint's 401, which needs wrong credentials): the API conformance suite (conformance/api) sends
    // the request each error needs.
    transaction.skip = true;
  }
  done();
});
