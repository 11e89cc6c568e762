// The admin API reference page (/admin/docs): the document needs the admin token, which a
// browser cannot send on a navigation, so this page asks for it, fetches /admin/openapi.json with
// it and hands the document to swagger-ui. The token is kept in this tab's session storage under
// the console's name (ui.js TOKEN), so a tab signed in to the console shows the reference at once.

const TOKEN = 'animal-store-admin-token';
const DOCUMENT = '/admin/openapi.json';

const signin = /** @type {HTMLElement} */ (document.getElementById('signin'));
const form = /** @type {HTMLFormElement} */ (document.getElementById('signin-form'));
const problem = /** @type {HTMLElement} */ (document.getElementById('signin-error'));

/** @param {string} message */
function askForToken(message) {
  problem.textContent = message;
  problem.hidden = message === '';
  signin.hidden = false;
  /** @type {HTMLInputElement} */ (form.elements.namedItem('token')).focus();
}

/** @param {string} token */
async function show(token) {
  let res;
  try {
    res = await fetch(DOCUMENT, { headers: { authorization: `Bearer ${token}` } });
  } catch {
    askForToken('The admin API cannot be reached.');
    return;
  }
  if (!res.ok) {
    sessionStorage.removeItem(TOKEN);
    const body = await res.json().catch(() => null);
    askForToken(
      res.status === 401
        ? 'That admin token is not valid.'
        : (body?.message ?? `The admin API answered ${res.status}.`),
    );
    return;
  }
  sessionStorage.setItem(TOKEN, token);
  signin.hidden = true;
  /** @type {any} */ (window).SwaggerUIBundle({
    spec: await res.json(),
    domNode: document.getElementById('reference'),
    deepLinking: true,
    displayOperationId: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 1,
    tryItOutEnabled: false,
    // "Try it out" sends the same token, as every admin call needs it.
    requestInterceptor: (/** @type {{ headers: Record<string, string> }} */ request) => {
      request.headers.Authorization = `Bearer ${sessionStorage.getItem(TOKEN) ?? ''}`;
      return request;
    },
  });
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  void show(String(new FormData(form).get('token') ?? ''));
});

const kept = sessionStorage.getItem(TOKEN);
if (kept === null) askForToken('');
else void show(kept);
