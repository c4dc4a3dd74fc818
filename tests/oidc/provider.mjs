// A real OpenID Connect provider for Skillscope's sign-in tests: panva's oidc-provider (OpenID
// Certified), configured here and started on loopback by tests/support/oidc_server.py.
//
//   node tests/oidc/provider.mjs USERS.json CLIENTS.json
//
// Listens on 127.0.0.1 on a free port and prints one line, `ISSUER http://127.0.0.1:PORT`, once it
// serves. People and their groups are read from USERS.json at every sign-in, so a test changes a
// person's groups "in the directory" by rewriting the file:
//   {"ada": {"password": "...", "name": "Ada", "email": "ada@example.org", "groups": ["research"],
//            "disabled": false}}
// The login page (our own interaction, since the provider's development pages accept any
// password) checks the password; a wrong one is refused here, and "disabled" people or a press
// of "Cancel" end the flow with access_denied sent back to the client.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [usersPath, clientsPath] = process.argv.slice(2);
const users = () => JSON.parse(readFileSync(usersPath, 'utf8'));
const clients = JSON.parse(readFileSync(clientsPath, 'utf8'));

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(uid, error = '') {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Directory sign-in</title></head>
<body><h1>Example directory</h1>${error ? `<p id="idp-error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Username <input name="login" id="idp-login" autocomplete="username"></label>
<label>Password <input name="password" id="idp-password" type="password"></label>
<button type="submit" id="idp-submit">Sign in</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button type="submit" id="idp-cancel">Cancel</button></form>
</body></html>`;
}

async function body(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients,
    cookies: { keys: ['skillscope-test-oidc-cookie-key-not-secret'] },
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username'],
      email: ['email', 'email_verified'],
      groups: ['groups'],
    },
    scopes: ['openid', 'profile', 'email', 'groups', 'offline_access'],
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, id) {
      const person = users()[id];
      if (!person) return undefined;
      return {
        accountId: id,
        async claims() {
          return {
            sub: id,
            preferred_username: id,
            name: person.name || id,
            email: person.email || `${id}@example.org`,
            email_verified: true,
            groups: person.groups || [],
          };
        },
      };
    },
    // First-party client: no consent screen, the scopes it asks for are granted.
    async loadExistingGrant(ctx) {
      const grantId =
        ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid profile email groups');
      await grant.save();
      return grant;
    },
  });

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    const match = req.url.match(/^\/interaction\/([^/?]+)(\/login|\/abort)?/);
    if (!match) return callback(req, res);
    try {
      const [, uid, action] = match;
      const details = await provider.interactionDetails(req, res);
      if (details.uid !== uid) throw new Error('interaction mismatch');
      if (!action && req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return res.end(page(uid));
      }
      if (action === '/abort' && req.method === 'POST') {
        return await provider.interactionFinished(req, res, {
          error: 'access_denied',
          error_description: 'The person cancelled the sign-in.',
        }, { mergeWithLastSubmission: false });
      }
      if (action === '/login' && req.method === 'POST') {
        const form = await body(req);
        const login = form.get('login') || '';
        const person = users()[login];
        if (!person || person.password !== form.get('password')) {
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          return res.end(page(uid, 'Wrong username or password.'));
        }
        if (person.disabled) {
          return await provider.interactionFinished(req, res, {
            error: 'access_denied',
            error_description: 'This account is disabled in the directory.',
          }, { mergeWithLastSubmission: false });
        }
        return await provider.interactionFinished(req, res, { login: { accountId: login } }, {
          mergeWithLastSubmission: false,
        });
      }
      res.writeHead(405);
      return res.end();
    } catch (err) {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      return res.end(`interaction failed: ${err.message}`);
    }
  });
  process.stdout.write(`ISSUER ${issuer}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
