// A real OpenID Connect provider for the sign-in tests: oidc-provider (npm), in memory.
//
//   node provider.mjs '{"port": 0, "clientId": ..., "clientSecret": ..., "redirectUri": ...,
//                       "accounts": {"alice": ["ldp-owners"]}}'
//
// Prints `{"issuer": "http://127.0.0.1:<port>"}` on one line once it listens. Any password
// signs an account in (oidc-provider's development login form); its `groups` claim comes
// from `accounts`. POST /__rotate replaces the signing key (a new `kid`) without a
// restart, as a provider rotates its keys; GET /__kid names the one in use.
import { generateKeyPairSync, randomUUID } from "node:crypto";
import http from "node:http";
import Provider from "oidc-provider";

const options = JSON.parse(process.argv[2] || "{}");

function newKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "RS256" };
}

function build(issuer, key) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    jwks: { keys: [key] },
    cookies: { keys: [cookieKey] }, // one per process: its sessions outlive a rotation
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name", "preferred_username"],
      groups: ["groups"],
    },
    scopes: ["openid", "email", "profile", "groups"],
    conformIdTokenClaims: false, // the groups claim in the id_token itself
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    async findAccount(ctx, id) {
      return {
        accountId: id,
        async claims() {
          return {
            sub: id,
            email: `${id}@example.org`,
            email_verified: true,
            preferred_username: id,
            groups: (options.accounts || {})[id] || [],
          };
        },
      };
    },
    // A first-party client: consent is given at once (no consent page to click).
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope("openid email profile groups");
      await grant.save();
      return grant;
    },
  });
  provider.proxy = false;
  return provider;
}

const cookieKey = randomUUID();
let key = newKey();
let provider;
let handle;
const server = http.createServer((req, res) => {
  if (req.url === "/__rotate" && req.method === "POST") {
    key = newKey();
    provider = build(provider.issuer, key);
    handle = provider.callback();
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  if (req.url === "/__kid") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  handle(req, res);
});
server.listen(options.port || 0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = build(issuer, key);
  handle = provider.callback();
  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
