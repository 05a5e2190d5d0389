// Foresight's dashboard: a small app with no build step over the JSON API (/api/v1).
// The bearer token lives in this tab's sessionStorage and goes in the Authorization header,
// never in a cookie (so there is nothing for a cross-site request to ride on). Every element
// is built with textContent and attributes, never by parsing HTML made from data.
'use strict';

const TOKEN_KEY = 'foresight.token';
const SVG_NS = 'http://www.w3.org/2000/svg';
const KINDS = [
  ['running', 'running job'],
  ['reserved', 'reserved global job'],
  ['planned', 'planned global job'],
  ['forecast', 'forecast local job'],
  ['held', 'administrative reservation'],
  ['free', 'free'],
];
const ACTIVE = ['pending', 'planned', 'reserved', 'running'];
const STATES = ['pending', 'planned', 'reserved', 'running', 'completed', 'failed', 'cancelled', 'timeout'];

const app = { me: null, timer: null };

// ---- DOM helpers -------------------------------------------------------------------------

function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

/** An HTML element. */
function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}

/** An SVG element. */
function s(tag, attrs, ...kids) {
  return build(document.createElementNS(SVG_NS, tag), attrs, kids);
}

function page(...kids) {
  const main = document.getElementById('page');
  main.replaceChildren(...kids.flat(Infinity).filter((k) => k));
}

// ---- formats -------------------------------------------------------------------------------

const pad = (n) => String(n).padStart(2, '0');

/** `2026-11-23 16:00:00 CET`: local time with the zone marked, as the CLI prints. */
function fmtTime(t) {
  if (t === null || t === undefined) return '—';
  const d = new Date(t * 1000);
  const zone = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' })
    .formatToParts(d).find((p) => p.type === 'timeZoneName');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
    (zone ? ` ${zone.value}` : '');
}

/** A reason of `explain` as the CLI's explain writes it: its words, then its instant (`at`)
 *  as fmtTime shows every time, and how far ahead of the service's `now` while it is still
 *  to come (`(in 2h)`). The words are shown as they are: nothing in them is read. */
function fmtReason(r, now) {
  if (r.at === null || r.at === undefined) return r.text;
  const ahead = r.at > now ? ` (in ${fmtSpan(r.at - now)})` : '';
  return `${r.text} ${fmtTime(r.at)}${ahead}`;
}

/** A span as the CLI writes one (`1d2h`, `2h`, `1h2m3s`, `0s`): `foresight_api::format_duration`. */
function fmtSpan(secs) {
  if (secs <= 0) return `${secs}s`;
  let rest = secs;
  let out = '';
  for (const [unit, name] of [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']]) {
    if (rest >= unit) { out += `${Math.floor(rest / unit)}${name}`; rest %= unit; }
  }
  return out;
}

/** squeue's `M:SS`, `H:MM:SS`, `D-HH:MM:SS`. */
function fmtDur(secs) {
  if (secs === null || secs === undefined) return '—';
  const neg = secs < 0;
  let t = Math.abs(Math.round(secs));
  const d = Math.floor(t / 86400); t %= 86400;
  const hh = Math.floor(t / 3600); t %= 3600;
  const m = Math.floor(t / 60); const ss = t % 60;
  let out;
  if (d > 0) out = `${d}-${pad(hh)}:${pad(m)}:${pad(ss)}`;
  else if (hh > 0) out = `${hh}:${pad(m)}:${pad(ss)}`;
  else out = `${m}:${pad(ss)}`;
  return neg ? `-${out}` : out;
}

/** A signed difference of starts: `+0:12 late`, `-1:00 early`, `on time`. */
function fmtDelta(secs) {
  if (secs === null || secs === undefined) return '—';
  if (secs === 0) return 'on time';
  return secs > 0 ? `+${fmtDur(secs)} late` : `${fmtDur(secs)} early`;
}

function fmtMoney(x) {
  return x === null || x === undefined ? 'unlimited' : Number(x).toFixed(2);
}

function badge(text) {
  return h('span', { class: `badge ${text}`, text });
}

function clustersOf(job) {
  if (job.parts && job.parts.length) return job.parts.map((p) => `${p.cluster}:${p.procs}`).join('+');
  return job.cluster || '';
}

// ---- API -----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

/** Calls `/api/v1{path}` with the token; JSON (or text) back, or an ApiError naming why. */
async function api(path, { method = 'GET', body } = {}) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`/api/v1${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit', cache: 'no-store',
  });
  const type = r.headers.get('Content-Type') || '';
  const data = type.includes('json') ? await r.json() : await r.text();
  if (!r.ok) {
    const msg = typeof data === 'object' && data
      ? (data.field ? `${data.field}: ${data.message}` : data.message) : String(data);
    if (r.status === 401) {
      logout(`The server refused the token: ${msg}`);
    }
    throw new ApiError(r.status, msg || `HTTP ${r.status}`);
  }
  return data;
}

function failure(e) {
  return h('p', { class: 'error', role: 'alert', text: e.message || String(e) });
}

// ---- login ---------------------------------------------------------------------------------

function showLogin(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('whoami').textContent = '';
  const input = h('input', {
    id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    placeholder: 'bearer token',
  });
  const err = h('p', { id: 'login-error', class: 'error', role: 'alert', text: message || '' });
  const form = h('form', { id: 'login' },
    h('h1', { text: 'Log in' }),
    h('p', { class: 'muted' },
      'Paste your Foresight token: the one ', h('code', { text: 'foresight user add' }),
      ' printed, or the administrator\'s from the data directory\'s ', h('code', { text: 'admin.token' }),
      '. It is kept in this tab only and forgotten when the tab closes.'),
    h('label', { for: 'token', text: 'Token' }), input,
    h('button', { type: 'submit', class: 'primary', id: 'login-button', text: 'Log in' }), err);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await start();
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      err.textContent = e.status === 401 ? `The server refused the token: ${e.message}` : e.message;
    }
  });
  page(form);
  input.focus();
}

function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  app.me = null;
  stopTimer();
  if (location.hash && location.hash !== '#/login') history.replaceState(null, '', '#/');
  showLogin(message);
}

/** Checks the stored token and shows the app. */
async function start() {
  app.me = await api('/whoami');
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = false;
  document.getElementById('whoami').textContent =
    app.me.admin ? `${app.me.name} (administrator)` : app.me.name;
  for (const a of document.querySelectorAll('.admin-only')) a.hidden = !app.me.admin;
  await route();
}

// ---- routing -------------------------------------------------------------------------------

function stopTimer() {
  if (app.timer) clearInterval(app.timer);
  app.timer = null;
}

function hashParts() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query] = raw.split('?');
  return { parts: path.split('/').filter(Boolean), query: new URLSearchParams(query || '') };
}

async function route() {
  if (!app.me) return;
  stopTimer();
  const { parts, query } = hashParts();
  const name = parts[0] || 'grid';
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.page === name);
  }
  const pages = { grid, plan, jobs, reservations, users, accuracy };
  const fn = pages[name];
  try {
    if (name === 'jobs' && parts[1]) await jobPage(parts[1]);
    else if (fn) await fn(query);
    else page(h('h1', { text: 'Not found' }), h('p', { text: `No page ${name}.` }));
  } catch (e) {
    if (app.me) page(h('h1', { text: 'Error' }), failure(e));
  }
}

function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

// ---- Grid ----------------------------------------------------------------------------------

async function grid() {
  const g = await api('/grid');
  const q = g.queue;
  const loadBar = (c) => {
    const pct = (n) => `${c.procs ? (100 * n) / c.procs : 0}%`;
    const busy = h('span', { class: 'busy' }); busy.style.width = pct(c.busy);
    const res = h('span', { class: 'reserved' }); res.style.width = pct(c.reserved);
    return h('div', { class: 'bar', title: `${c.busy} busy, ${c.reserved} reserved, ${c.free} free` }, busy, res);
  };
  page(
    h('h1', { text: 'Grid' }),
    h('div', { class: 'cards' },
      h('div', { class: 'card', id: 'last-cycle' },
        h('div', { class: 'label', text: 'Last scheduling cycle' }),
        h('div', { class: 'value', text: g.last_cycle_at ? fmtTime(g.last_cycle_at) : 'none yet' }),
        h('div', { class: 'muted', text: `took ${(g.last_cycle_seconds * 1000).toFixed(1)} ms · ${g.cycles} cycles since start` })),
      h('div', { class: 'card', id: 'global-queue' },
        h('div', { class: 'label', text: 'Global queue' }),
        h('div', { class: 'value', text: `${q.pending + q.planned + q.reserved} waiting` }),
        h('div', { class: 'muted', text: `${q.pending} pending (${q.held} held) · ${q.planned} planned · ${q.reserved} reserved · ${q.running} running` })),
      h('div', { class: 'card', id: 'local-queues' },
        h('div', { class: 'label', text: 'Local queues' }),
        h('div', { class: 'value', text: `${q.local_pending} waiting` }),
        h('div', { class: 'muted', text: `${q.local_running} running` }))),
    h('table', { id: 'clusters' },
      h('thead', {}, h('tr', {},
        ['Cluster', 'Kind', 'State', 'Processors', 'Busy', 'Reserved', 'Free', 'Load', 'Running jobs', 'Local queue', 'Policy', 'Tariff']
          .map((t, i) => h('th', { class: i >= 3 && i <= 6 || i >= 8 && i <= 9 || i === 11 ? 'num' : null, text: t })))),
      h('tbody', {}, g.clusters.map((c) => h('tr', { 'data-cluster': c.name },
        h('td', {}, h('a', { href: `#/plan?cluster=${encodeURIComponent(c.name)}`, text: c.name })),
        h('td', { text: c.kind }),
        h('td', { class: 'state' }, badge(c.state), c.reason ? h('div', { class: 'muted reason', text: c.reason }) : null),
        h('td', { class: 'num', text: c.procs }),
        h('td', { class: 'num busy', text: c.busy }),
        h('td', { class: 'num reserved', text: c.reserved }),
        h('td', { class: 'num free', text: c.free }),
        h('td', {}, loadBar(c)),
        h('td', { class: 'num', text: c.running }),
        h('td', { class: 'num queued', text: c.queued }),
        h('td', { text: c.policy }),
        h('td', { class: 'num', text: c.tariff }))))),
    h('p', { class: 'muted', text: `Server time ${fmtTime(g.now)}; refreshed every 15 s.` }),
  );
  app.timer = setInterval(() => { if (!document.hidden) route(); }, 15000);
}

// ---- Plan ----------------------------------------------------------------------------------

const WINDOWS = [[3600, '1 hour'], [6 * 3600, '6 hours'], [86400, '1 day'], [3 * 86400, '3 days'], [7 * 86400, '7 days']];

function localInput(t) {
  const d = new Date(t * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

async function plan(query) {
  const now = Math.floor(Date.now() / 1000);
  const from = Number(query.get('from')) || now;
  const span = Number(query.get('span')) || 3600;
  const cluster = query.get('cluster') || '';
  const clusters = await api('/clusters');
  const params = new URLSearchParams({ from: String(from), to: String(from + span) });
  if (cluster) params.set('cluster', cluster);
  const plans = await api(`/plan?${params}`);

  const fromInput = h('input', { type: 'datetime-local', id: 'plan-from', value: localInput(from) });
  const spanSelect = h('select', { id: 'plan-span' },
    WINDOWS.map(([v, t]) => h('option', { value: v, selected: v === span, text: t })));
  const clusterSelect = h('select', { id: 'plan-cluster' },
    h('option', { value: '', text: 'all clusters' }),
    clusters.map((c) => h('option', { value: c.name, selected: c.name === cluster, text: c.name })));
  const form = h('form', { class: 'inline', id: 'plan-form' },
    h('label', {}, 'From', fromInput),
    h('label', {}, 'Window', spanSelect),
    h('label', {}, 'Cluster', clusterSelect),
    h('button', { type: 'submit', class: 'primary', text: 'Show' }),
    h('button', { type: 'button', text: 'Now', onclick: () => go(`#/plan?span=${spanSelect.value}${clusterSelect.value ? `&cluster=${encodeURIComponent(clusterSelect.value)}` : ''}`) }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = fromInput.value ? Math.floor(new Date(fromInput.value).getTime() / 1000) : now;
    const p = new URLSearchParams({ from: String(t), span: spanSelect.value });
    if (clusterSelect.value) p.set('cluster', clusterSelect.value);
    go(`#/plan?${p}`);
  });
  const legend = h('div', { class: 'legend', id: 'legend' },
    KINDS.map(([k, t]) => h('span', {}, h('i', { class: `k-${k}` }), t)),
    h('span', {}, h('i', { class: 'k-coalloc' }), 'dashes link the parts of a co-allocated job'));
  const tip = h('div', { class: 'tooltip', hidden: true });
  page(h('h1', { text: 'Plan' }), form, legend,
    h('div', { class: 'chart', id: 'gantt' }, gantt(plans, now, tip)),
    coallocList(plans), tip);
}

/** Slots with the same occupant, id and times on consecutive processors, as one bar. */
function bars(cp) {
  const groups = new Map();
  for (const sl of cp.slots) {
    const key = `${sl.occupant}|${sl.id}|${sl.start}|${sl.end}`;
    if (!groups.has(key)) groups.set(key, { ...sl, procs: [] });
    groups.get(key).procs.push(sl.processor);
  }
  const out = [];
  for (const g of groups.values()) {
    g.procs.sort((a, b) => a - b);
    let run = [g.procs[0]];
    for (const p of g.procs.slice(1)) {
      if (p === run[run.length - 1] + 1) run.push(p);
      else { out.push({ ...g, run }); run = [p]; }
    }
    out.push({ ...g, run });
  }
  return out;
}

function rangeText(run) {
  return run.length === 1 ? `processor ${run[0]}` : `processors ${run[0]}–${run[run.length - 1]}`;
}

function slotDetails(b, cluster) {
  const lines = [];
  const what = KINDS.find(([k]) => k === b.occupant);
  if (b.occupant === 'held') lines.push(`reservation ${b.id ?? ''} (administrative)`);
  else if (b.occupant !== 'free') lines.push(`${b.id !== null ? `job ${b.id}` : 'a job of another user'} · ${what ? what[1] : b.occupant}`);
  else lines.push(`free · ${b.cost} per processor-second`);
  lines.push(`${cluster}: ${rangeText(b.run)}`);
  lines.push(`${fmtTime(b.start)} → ${fmtTime(b.end)} (${fmtDur(b.end - b.start)})`);
  return lines.join('\n');
}

/** Round times (local clock) across [from, to]: at most about ten of them. */
function niceTicks(from, to) {
  const steps = [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800];
  const step = steps.find((st) => (to - from) / st <= 10) || 86400 * Math.ceil((to - from) / 864000);
  const offset = -new Date(from * 1000).getTimezoneOffset() * 60;
  const out = [];
  for (let t = Math.ceil((from + offset) / step) * step - offset; t <= to; t += step) {
    if (t - from > (to - from) * 0.03 && to - t > (to - from) * 0.03) out.push(t);
  }
  return out;
}

/** The Gantt chart: one band per cluster, one row per processor, time across. */
function gantt(plans, now, tip) {
  if (!plans.length) return h('p', { class: 'muted', text: 'No clusters.' });
  const from = plans[0].from; const to = plans[0].to;
  const W = 1200; const left = 110; const right = 16; const top = 28;
  const totalProcs = plans.reduce((n, p) => n + p.procs, 0);
  const rowH = Math.max(4, Math.min(22, Math.floor(520 / Math.max(1, totalProcs))));
  const bandGap = 26;
  const x = (t) => left + ((Math.min(Math.max(t, from), to) - from) / (to - from)) * (W - left - right);
  let y = top;
  const bands = [];
  for (const cp of plans) {
    bands.push({ cp, y0: y + bandGap - 8 });
    y += bandGap - 8 + cp.procs * rowH;
  }
  const H = y + 12;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, id: 'gantt-svg', role: 'img', 'aria-label': 'plan' });
  // Time axis.
  const axis = s('g', { class: 'axis' });
  const gridLines = s('g', { class: 'grid' });
  for (const t of niceTicks(from, to)) {
    const d = new Date(t * 1000);
    const label = (to - from) > 86400
      ? `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`
      : `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    const xi = x(t);
    axis.append(s('text', { x: xi, y: top - 12, 'text-anchor': 'middle', text: label }));
    gridLines.append(s('line', { x1: xi, x2: xi, y1: top - 6, y2: H - 8 }));
  }
  svg.append(gridLines, axis);
  const parts = new Map(); // job id → [{cluster, x, y0, y1}]
  for (const { cp, y0 } of bands) {
    const band = s('g', { class: 'cluster', 'data-cluster': cp.cluster });
    band.append(s('text', { class: 'cluster-name', x: 4, y: y0 - 4, text: `${cp.cluster} (${cp.procs})` }));
    if (rowH >= 10) {
      for (let p = 0; p < cp.procs; p += 1) {
        band.append(s('text', { class: 'proc-name', x: left - 6, y: y0 + p * rowH + rowH * 0.72, 'text-anchor': 'end', text: `p${p}` }));
      }
    }
    for (const b of bars(cp)) {
      const x0 = x(b.start); const x1 = x(b.end);
      const yTop = y0 + b.run[0] * rowH; const height = b.run.length * rowH;
      const g = s('g', {});
      const rect = s('rect', {
        class: `slot k-${b.occupant}`, x: x0, y: yTop, width: Math.max(1, x1 - x0), height,
        'data-kind': b.occupant, 'data-job': b.occupant !== 'free' && b.occupant !== 'held' && b.id !== null ? b.id : null,
        'data-reservation': b.occupant === 'held' ? b.id : null,
        'data-cluster': cp.cluster, 'data-processors': b.run.join(','),
      }, s('title', { text: slotDetails(b, cp.cluster) }));
      g.append(rect);
      if (b.id !== null && b.occupant !== 'free' && x1 - x0 > 26 && height >= 10) {
        g.append(s('text', {
          class: `slot-label${b.occupant === 'forecast' || b.occupant === 'planned' ? ' dark' : ''}`,
          x: x0 + 4, y: yTop + height / 2 + 4, text: b.occupant === 'held' ? `R${b.id}` : `${b.id}`,
        }));
      }
      band.append(g);
      const job = rect.getAttribute('data-job');
      if (job !== null) {
        if (!parts.has(job)) parts.set(job, []);
        parts.get(job).push({ cluster: cp.cluster, x: x0, y0: yTop, y1: yTop + height, run: b.run, kind: b.occupant });
      }
    }
    svg.append(band);
  }
  // Co-allocated parts: a dashed line from each part to the next cluster's part.
  for (const [job, ps] of parts) {
    const clusters = new Set(ps.map((p) => p.cluster));
    if (clusters.size < 2) continue;
    const ordered = [...ps].sort((a, b) => a.y0 - b.y0);
    for (let i = 0; i + 1 < ordered.length; i += 1) {
      const a = ordered[i]; const b = ordered[i + 1];
      if (a.cluster === b.cluster) continue;
      svg.append(s('line', { class: 'coalloc', 'data-job': job, x1: a.x + 2, x2: b.x + 2, y1: a.y1, y2: b.y0 },
        s('title', { text: `job ${job}: co-allocated parts on ${[...clusters].join(' and ')}` })));
    }
  }
  if (now >= from && now <= to) {
    svg.append(s('g', { class: 'now' },
      s('line', { x1: x(now), x2: x(now), y1: top - 6, y2: H - 8 }),
      s('text', { x: x(now) + 3, y: H - 1, text: 'now' })));
  }
  // Hover: the slot's details beside the pointer; every part of the same job lit up.
  svg.addEventListener('mousemove', (ev) => {
    const rect = ev.target.closest && ev.target.closest('rect.slot');
    for (const el of svg.querySelectorAll('.hl')) el.classList.remove('hl');
    if (!rect) { tip.hidden = true; return; }
    const job = rect.getAttribute('data-job');
    if (job !== null) for (const el of svg.querySelectorAll(`[data-job="${CSS.escape(job)}"]`)) el.classList.add('hl');
    tip.textContent = rect.querySelector('title').textContent;
    tip.hidden = false;
    tip.style.left = `${ev.clientX + 14}px`;
    tip.style.top = `${ev.clientY + 14}px`;
  });
  svg.addEventListener('mouseleave', () => { tip.hidden = true; });
  svg.addEventListener('click', (ev) => {
    const rect = ev.target.closest && ev.target.closest('rect.slot[data-job]');
    if (rect) go(`#/jobs/${rect.getAttribute('data-job')}`);
  });
  return svg;
}

function coallocList(plans) {
  const where = new Map();
  for (const cp of plans) {
    for (const sl of cp.slots) {
      if (sl.id === null || sl.occupant === 'free' || sl.occupant === 'held') continue;
      const k = String(sl.id);
      if (!where.has(k)) where.set(k, new Map());
      const m = where.get(k);
      // A running job's slots begin at the window's start: its own start is started_at.
      if (!m.has(cp.cluster)) m.set(cp.cluster, { kind: sl.occupant, start: sl.started_at ?? sl.start, procs: new Set() });
      m.get(cp.cluster).procs.add(sl.processor);
    }
  }
  const rows = [...where].filter(([, m]) => m.size > 1);
  if (!rows.length) return h('p', { class: 'muted', id: 'coalloc', text: 'No co-allocated job in this window.' });
  return h('div', {},
    h('h2', { text: 'Co-allocated jobs' }),
    h('table', { id: 'coalloc' },
      h('thead', {}, h('tr', {}, ['Job', 'State', 'Start', 'Parts'].map((t) => h('th', { text: t })))),
      h('tbody', {}, rows.map(([id, m]) => {
        const first = [...m.values()][0];
        return h('tr', { 'data-job': id },
          h('td', {}, h('a', { href: `#/jobs/${id}`, text: id })),
          h('td', {}, badge(first.kind)),
          h('td', { text: fmtTime(first.start) }),
          h('td', { text: [...m].map(([c, v]) => `${c}: ${v.procs.size}`).join(' + ') }));
      }))));
}

// ---- Jobs ----------------------------------------------------------------------------------

async function jobs(query) {
  const state = query.get('state') || 'active';
  const user = query.get('user') || '';
  const limit = Number(query.get('limit')) || 200;
  const params = new URLSearchParams({ limit: String(state === 'active' || state === 'all' ? 100000 : limit) });
  if (STATES.includes(state)) params.set('state', state);
  if (user) params.set('user', user);
  let list = await api(`/jobs?${params}`);
  if (state === 'active') list = list.filter((j) => ACTIVE.includes(j.state));
  list = list.slice(-limit).reverse();

  const stateSelect = h('select', { id: 'filter-state', name: 'state' },
    [['active', 'active (pending … running)'], ['all', 'all']].concat(STATES.map((x) => [x, x]))
      .map(([v, t]) => h('option', { value: v, selected: v === state, text: t })));
  const userInput = app.me.admin ? h('input', { id: 'filter-user', name: 'user', value: user, placeholder: 'any user', size: 12 }) : null;
  const limitInput = h('input', { id: 'filter-limit', name: 'limit', type: 'number', min: 1, value: limit, size: 6 });
  const form = h('form', { class: 'inline', id: 'jobs-filter' },
    h('label', {}, 'State', stateSelect),
    userInput ? h('label', {}, 'User', userInput) : null,
    h('label', {}, 'At most', limitInput),
    h('button', { type: 'submit', class: 'primary', text: 'Filter' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams({ state: stateSelect.value, limit: limitInput.value });
    if (userInput && userInput.value.trim()) p.set('user', userInput.value.trim());
    go(`#/jobs?${p}`);
  });
  stateSelect.addEventListener('change', () => form.requestSubmit());
  page(h('h1', { text: 'Jobs' }), form,
    list.length === 0 ? h('p', { class: 'muted', id: 'no-jobs', text: 'No job matches.' }) :
      h('table', { id: 'jobs' },
        h('thead', {}, h('tr', {}, ['ID', 'Name', 'User', 'State', 'Procs', 'Clusters', 'Limit', 'Submitted', 'Start (planned or actual)', 'Ended', 'Charge']
          .map((t) => h('th', { text: t })))),
        h('tbody', {}, list.map((j) => h('tr', { 'data-job': j.id },
          h('td', {}, h('a', { href: `#/jobs/${j.id}`, text: j.id })),
          h('td', { text: j.name || '' }),
          h('td', { text: j.user }),
          h('td', { class: 'state' }, badge(j.state), j.held ? ' held' : '', j.suspended ? ' suspended' : ''),
          h('td', { class: 'num', text: j.procs }),
          h('td', { text: clustersOf(j) }),
          h('td', { class: 'num limit', text: fmtDur(j.walltime) }),
          h('td', { text: fmtTime(j.submitted_at) }),
          h('td', j.started_at === null && j.planned_start !== null && !j.start_guaranteed
            ? { class: 'forecast', title: j.start_caveat || 'forecast', text: `~${fmtTime(j.planned_start)}` }
            : { text: fmtTime(j.started_at ?? j.planned_start) }),
          h('td', { text: fmtTime(j.ended_at) }),
          h('td', { class: 'num', text: j.charged.toFixed(2) }))))));
}

async function jobPage(idText) {
  const id = Number(idText);
  const j = await api(`/jobs/${id}`);
  let explain = null;
  try { explain = await api(`/jobs/${id}/explain`); } catch (e) { explain = { now: 0, reasons: [{ text: `(no explanation: ${e.message})`, at: null }] }; }
  const planned = j.first_planned_start;
  const delta = planned !== null && j.started_at !== null ? j.started_at - planned : null;
  const fact = (k, v) => [h('dt', { text: k }), h('dd', {}, v)];
  const partCount = Math.max(1, j.parts.length);
  const partSelect = h('select', { id: 'output-part' },
    Array.from({ length: partCount }, (_, i) => h('option', { value: i, text: j.parts[i] ? `part ${i} (${j.parts[i].cluster})` : `part ${i}` })));
  const streamSelect = h('select', { id: 'output-stream' },
    h('option', { value: 'stdout', text: 'standard output' }), h('option', { value: 'stderr', text: 'standard error' }));
  const out = h('pre', { class: 'output', id: 'output' });
  const loadOutput = async () => {
    out.textContent = '…';
    try {
      const text = await api(`/jobs/${id}/output?part=${partSelect.value}&stderr=${streamSelect.value === 'stderr'}`);
      const lines = String(text).split('\n');
      if (lines[lines.length - 1] === '') lines.pop();
      out.textContent = lines.length ? lines.slice(-100).join('\n') : '(empty)';
    } catch (e) {
      out.textContent = e.message;
    }
  };
  partSelect.addEventListener('change', loadOutput);
  streamSelect.addEventListener('change', loadOutput);
  const actions = [];
  if (!['completed', 'failed', 'cancelled', 'timeout'].includes(j.state)) {
    actions.push(h('button', {
      type: 'button', class: 'danger', id: 'cancel-job', text: 'Cancel job',
      onclick: async () => {
        if (!window.confirm(`Cancel job ${id}?`)) return;
        try { await api(`/jobs/${id}/cancel`, { method: 'POST' }); route(); } catch (e) { page(failure(e)); }
      },
    }));
  }
  page(
    h('h1', {}, `Job ${j.id}`, j.name ? ` — ${j.name}` : '', ' ', badge(j.state)),
    h('div', { class: 'columns' }, h('div', {},
    h('dl', { class: 'facts', id: 'job-facts' },
      fact('User', j.user),
      fact('State', `${j.state}${j.held ? ', held' : ''}${j.suspended ? ', suspended' : ''}${j.exit_code !== null ? `, exit code ${j.exit_code}` : ''}${j.signal !== null ? `, signal ${j.signal}` : ''}`),
      fact('Processors', String(j.procs)),
      fact('Walltime', fmtDur(j.walltime)),
      fact('Price', j.price === null ? 'any' : `${j.price} per processor-second`),
      fact('Command', h('code', { text: j.command.join(' ') })),
      fact('Submitted', fmtTime(j.submitted_at)),
      j.begin != null ? fact('Not before', h('span', { id: 'job-begin', text: fmtTime(j.begin) })) : null,
      j.reservation !== null ? fact('Reservation', String(j.reservation)) : null,
      fact('Ended', fmtTime(j.ended_at)),
      fact('Charge', h('span', { id: 'job-charge', text: j.charged.toFixed(2) })),
      j.reason ? fact('Reason', h('span', { id: 'job-reason', text: j.reason })) : null),
    actions.length ? h('p', {}, actions) : null,
    h('h2', { text: 'Start: planned and actual' }),
    h('table', { id: 'job-start' },
      h('tbody', {},
        h('tr', {}, h('th', { text: 'First planned start' }), h('td', { text: fmtTime(planned) })),
        h('tr', {}, h('th', { text: 'Planned start now' }), h('td', { id: 'job-planned-start', text: fmtTime(j.planned_start) })),
        j.started_at === null && j.planned_start !== null
          ? h('tr', {}, h('th', { text: 'Promise' }), h('td', { id: 'start-promise', text: j.start_guaranteed ? 'guaranteed: a reservation holds it' : `not guaranteed: ${j.start_caveat}` }))
          : null,
        h('tr', {}, h('th', { text: 'Actual start' }), h('td', { text: fmtTime(j.started_at) })),
        h('tr', {}, h('th', { text: 'Actual − first planned' }), h('td', { id: 'start-delta', text: fmtDelta(delta) })))),
    h('h2', { text: 'Parts per cluster' }),
    j.parts.length === 0 ? h('p', { class: 'muted', id: 'job-parts', text: j.cluster ? `local job of ${j.cluster}; no processors yet` : 'none yet: not reserved' }) :
      h('table', { id: 'job-parts' },
        h('thead', {}, h('tr', {}, ['Part', 'Cluster', 'Processors', 'Which'].map((t) => h('th', { text: t })))),
        h('tbody', {}, j.parts.map((p, i) => h('tr', { 'data-cluster': p.cluster },
          h('td', { class: 'num', text: i }), h('td', { text: p.cluster }), h('td', { class: 'num', text: p.procs }),
          h('td', { text: p.processors.length ? p.processors.join(',') : '—' }))))),
    ), h('div', {},
    h('h2', { text: 'Explain' }),
    h('ul', { id: 'explain' }, explain.reasons.map((r) => h('li', { text: fmtReason(r, explain.now) }))),
    h('h2', { text: 'Output (last 100 lines)' }),
    h('form', { class: 'inline' }, h('label', {}, 'Part', partSelect), h('label', {}, 'Stream', streamSelect),
      h('button', { type: 'button', id: 'output-refresh', text: 'Refresh', onclick: loadOutput })),
    out)),
  );
  await loadOutput();
  // Follow a job that is still going: its state, plan and output change.
  if (actions.length) app.timer = setInterval(() => { if (!document.hidden) route(); }, 3000);
}

// ---- Reservations --------------------------------------------------------------------------

function aclText(a) {
  const bits = [];
  for (const k of ['users', 'groups', 'accounts', 'classes', 'qos']) if (a[k] && a[k].length) bits.push(`${k}: ${a[k].join(',')}`);
  if (a.job !== null && a.job !== undefined) bits.push(`job ${a.job}`);
  return bits.join('; ') || 'nobody';
}

async function reservations() {
  const list = (await api('/reservations')).sort((a, b) => b.id - a.id);
  const live = ['tentative', 'committed', 'active'];
  page(h('h1', { text: 'Reservations' }),
    list.length === 0 ? h('p', { class: 'muted', id: 'no-reservations', text: 'No reservation you may see.' }) :
      h('table', { id: 'reservations' },
        h('thead', {}, h('tr', {}, ['ID', 'Kind', 'Cluster', 'Processors', 'Start', 'End', 'State', 'Who may use it', 'Owner', '']
          .map((t) => h('th', { text: t })))),
        h('tbody', {}, list.map((r) => h('tr', { 'data-reservation': r.id },
          h('td', { class: 'num', text: r.id }),
          h('td', { text: r.kind }),
          h('td', { text: r.cluster }),
          h('td', { text: r.processors && r.processors.length ? `${r.procs} (${r.processors.join(',')})` : String(r.procs) }),
          h('td', { text: fmtTime(r.start) }),
          h('td', { text: fmtTime(r.end) }),
          h('td', {}, badge(r.state), r.expires_at ? h('div', { class: 'muted', text: `expires ${fmtTime(r.expires_at)}` }) : null),
          h('td', { text: aclText(r.acl) }),
          h('td', { text: r.owner }),
          h('td', {}, app.me.admin && r.kind === 'admin' && live.includes(r.state)
            ? h('button', {
              type: 'button', class: 'danger', text: 'Release',
              onclick: async () => {
                if (!window.confirm(`Release reservation ${r.id}?`)) return;
                await api(`/reservations/${r.id}/release`, { method: 'POST' });
                route();
              },
            }) : null))))));
}

// ---- Users and budgets ---------------------------------------------------------------------

async function users() {
  if (!app.me.admin) {
    page(h('h1', { text: 'Users and budgets' }), h('p', { class: 'error', text: 'Administrators only.' }));
    return;
  }
  const list = await api('/users');
  const nameSelect = h('select', { id: 'budget-user' }, list.map((u) => h('option', { value: u.name, text: u.name })));
  const amount = h('input', { id: 'budget-add', type: 'number', step: 'any', required: true, placeholder: 'amount' });
  const msg = h('span', { id: 'budget-message', role: 'status' });
  const form = h('form', { class: 'inline', id: 'budget-form' },
    h('label', {}, 'User', nameSelect), h('label', {}, 'Add to budget', amount),
    h('button', { type: 'submit', class: 'primary', text: 'Add' }), msg);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api(`/users/${encodeURIComponent(nameSelect.value)}/budget`, { method: 'POST', body: { add: Number(amount.value) } });
      route();
    } catch (e) {
      msg.textContent = e.message; msg.className = 'error';
    }
  });
  page(h('h1', { text: 'Users and budgets' }),
    h('table', { id: 'users' },
      h('thead', {}, h('tr', {}, ['User', 'Administrator', 'Budget left', 'Spent', 'Spent of total', 'Unix account']
        .map((t, i) => h('th', { class: i === 2 || i === 3 ? 'num' : null, text: t })))),
      h('tbody', {}, list.map((u) => {
        const total = u.budget === null ? null : u.budget + u.spent;
        const used = h('span', { class: 'busy' });
        used.style.width = `${total ? Math.min(100, (100 * u.spent) / total) : 0}%`;
        return h('tr', { 'data-user': u.name },
          h('td', { text: u.name }),
          h('td', { text: u.admin ? 'yes' : '' }),
          h('td', { class: 'num budget', text: fmtMoney(u.budget) }),
          h('td', { class: 'num spent', text: u.spent.toFixed(2) }),
          h('td', {}, total === null ? h('span', { class: 'muted', text: 'no limit' }) : h('div', { class: 'bar' }, used)),
          h('td', { class: 'unix' }, ...unixAccount(u)));
      }))),
    h('h2', { text: 'Top up a budget' }), form);
}

/** The Unix account a user's jobs run as (`runs_as`), marked with the rule that chose it
 *  when no administrator did: `nobody (default *)`, `alice_hpc ([unix_user])`. */
function unixAccount(u) {
  const account = u.runs_as ?? u.unix_user;
  if (!account) return [h('span', { class: 'muted', text: 'default' })];
  const why = { table: '[unix_user]', default: 'default *', name: 'own name' }[u.runs_as_from];
  return why ? [account, ' ', h('span', { class: 'muted', text: `(${why})` })] : [account];
}

// ---- Accuracy ------------------------------------------------------------------------------

async function accuracy() {
  const all = await api('/jobs?limit=100000');
  const jobsWithBoth = all
    .filter((j) => j.first_planned_start !== null && j.started_at !== null)
    .sort((a, b) => a.started_at - b.started_at)
    .slice(-40);
  const head = h('h1', { text: 'Accuracy: planned and actual starts' });
  if (!jobsWithBoth.length) {
    page(head, h('p', { class: 'muted', id: 'no-accuracy', text: 'No started job had a planned start yet.' }));
    return;
  }
  const deltas = jobsWithBoth.map((j) => j.started_at - j.first_planned_start);
  const meanAbs = deltas.reduce((a, d) => a + Math.abs(d), 0) / deltas.length;
  const late = deltas.filter((d) => d > 0).length;
  const early = deltas.filter((d) => d < 0).length;
  // One row per job: a hollow dot at the first planned start, a filled one at the actual start.
  const times = jobsWithBoth.flatMap((j) => [j.first_planned_start, j.started_at]);
  let t0 = Math.min(...times); let t1 = Math.max(...times);
  if (t1 - t0 < 60) { t0 -= 30; t1 += 30; }
  const W = 1000; const left = 80; const right = 20; const top = 26; const rowH = 18;
  const H = top + jobsWithBoth.length * rowH + 10;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (W - left - right);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, id: 'accuracy-svg', role: 'img', 'aria-label': 'planned and actual starts' });
  const axis = s('g', { class: 'axis' }); const gridLines = s('g', { class: 'grid' });
  for (const t of niceTicks(t0, t1)) {
    const d = new Date(t * 1000);
    axis.append(s('text', { x: x(t), y: 14, 'text-anchor': 'middle', text: `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` }));
    gridLines.append(s('line', { x1: x(t), x2: x(t), y1: top - 6, y2: H - 4 }));
  }
  svg.append(gridLines, axis);
  jobsWithBoth.forEach((j, i) => {
    const y = top + i * rowH + rowH / 2;
    const d = j.started_at - j.first_planned_start;
    const tip = `job ${j.id}: planned ${fmtTime(j.first_planned_start)}, started ${fmtTime(j.started_at)} (${fmtDelta(d)})`;
    svg.append(s('g', { class: 'acc-row', 'data-job': j.id },
      s('title', { text: tip }),
      s('text', { x: left - 8, y: y + 4, 'text-anchor': 'end', text: `job ${j.id}` }),
      s('line', { class: 'diff', x1: x(j.first_planned_start), x2: x(j.started_at), y1: y, y2: y }),
      s('circle', { class: 'planned-pt', cx: x(j.first_planned_start), cy: y, r: 5 }),
      s('circle', { class: `actual-pt${d > 0 ? ' late' : ''}`, cx: x(j.started_at), cy: y, r: 4 })));
  });
  page(head,
    h('div', { class: 'cards' },
      h('div', { class: 'card', id: 'accuracy-summary' },
        h('div', { class: 'label', text: `Last ${jobsWithBoth.length} started jobs with a plan` }),
        h('div', { class: 'value', text: `mean |actual − planned| ${fmtDur(meanAbs)}` }),
        h('div', { class: 'muted', text: `${late} late · ${early} early · ${deltas.length - late - early} on time` }))),
    h('div', { class: 'legend' },
      h('span', {}, h('i', { class: 'k-free' }), '○ first planned start'),
      h('span', {}, h('i', { class: 'k-running' }), '● actual start (red: later than planned)')),
    h('div', { class: 'chart' }, svg),
    h('h2', { text: 'Jobs' }),
    h('table', { id: 'accuracy' },
      h('thead', {}, h('tr', {}, ['Job', 'User', 'First planned start', 'Actual start', 'Difference'].map((t) => h('th', { text: t })))),
      h('tbody', {}, [...jobsWithBoth].reverse().map((j) => h('tr', { 'data-job': j.id },
        h('td', {}, h('a', { href: `#/jobs/${j.id}`, text: j.id })),
        h('td', { text: j.user }),
        h('td', { text: fmtTime(j.first_planned_start) }),
        h('td', { text: fmtTime(j.started_at) }),
        h('td', { class: 'delta', text: fmtDelta(j.started_at - j.first_planned_start) }))))));
}

// ---- boot ----------------------------------------------------------------------------------

window.addEventListener('hashchange', route);
document.getElementById('logout').addEventListener('click', () => logout('Logged out.'));
if (sessionStorage.getItem(TOKEN_KEY)) {
  start().catch((e) => logout(e.message));
} else {
  showLogin();
}
