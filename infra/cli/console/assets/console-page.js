// What every view of the console's page uses: plain DOM helpers and the API call. Every value
// reaches the page through textContent, never as HTML, so nothing an event or a letter holds
// can run here.

let session;

export const $ = (selector) => document.querySelector(selector);

export function element(name, text, attributes = {}) {
  const node = document.createElement(name);
  if (text !== undefined) node.textContent = String(text);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

export function say(text) {
  $('#message').textContent = text ?? '';
}

export function setText(id, text) {
  $(`#${id}`).textContent = text;
}

/** GET or POST one API route; POST carries the token header the server asks changes for. */
export async function api(path, body) {
  const init = { credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    session ??= await (await fetch('/api/session', init)).json();
    init.method = 'POST';
    init.headers = { 'content-type': 'application/json', [session.headerName]: session.token };
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error ?? `HTTP ${response.status}`);
  return answer;
}

export const value = (n, unit = '') => (n === null || n === undefined ? 'unknown' : `${n}${unit}`);

/** An ISO time as people read it: "2026-11-28 14:51:09 UTC". */
export function at(iso) {
  if (!iso) return '';
  const time = new Date(iso);
  return Number.isNaN(time.getTime())
    ? String(iso)
    : `${time.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How long ago or how soon: "3 min ago", "in 20 s". */
export function fromNow(iso) {
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (Number.isNaN(seconds)) return '';
  const s = Math.abs(seconds);
  const text =
    s >= 86400
      ? `${Math.floor(s / 86400)} d`
      : s >= 3600
        ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
        : s >= 60
          ? `${Math.floor(s / 60)} min`
          : `${s} s`;
  return seconds < 0 ? `${text} ago` : `in ${text}`;
}

/**
 * A table of rows: each column a key and its title; a cell is the row's text under that key,
 * or the node it holds (a link). `attributes(row)` gives each row's own attributes.
 */
export function table(columns, rows, attributes = () => ({})) {
  const head = element('tr');
  head.append(...columns.map(([, title]) => element('th', title, { scope: 'col' })));
  const body = rows.map((row) => {
    const tr = element('tr', undefined, attributes(row));
    tr.append(
      ...columns.map(([key]) => {
        const cell = row[key];
        if (cell instanceof Node) {
          const td = element('td');
          td.append(cell);
          return td;
        }
        return element('td', cell ?? '');
      }),
    );
    return tr;
  });
  const node = element('table');
  node.append(element('thead'), element('tbody'));
  node.tHead.append(head);
  node.tBodies[0].append(...body);
  return node;
}

export function formFilters(form) {
  const data = new FormData(form);
  return Object.fromEntries([...data.entries()].filter(([, v]) => String(v).trim() !== ''));
}
