// The Levee console: draws the health snapshot (read every two seconds),
// follows the event stream, and with the admin key offers the operator's
// actions. Every text from the server is set as text, never as markup.
'use strict';

(() => {
  const base = new URL('./', location.href);
  const POLL_MS = 2000;
  const SHARE_WINDOW_MS = 5 * 60 * 1000;
  const TIMELINE_MAX = 200;

  let key = null; // the admin key: this tab's memory only
  let admin = false;
  let snapshot = null;
  let snapshotAt = 0;
  let asked = 0; // the newest snapshot asked for: an older answer is dropped
  let lastRefresh = 0;
  let refreshTimer = null;
  let events = null; // the AbortController of the event stream
  const served = []; // [{at, counts: Map}] for each target's recent share
  const lastChange = new Map(); // `target scope mechanism` -> the last event

  const $ = (id) => document.getElementById(id);

  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  };

  const auth = () => (key ? { Authorization: `Bearer ${key}` } : {});

  // === formatting ===

  const duration = (ms) => {
    if (ms === null || ms === undefined) return '';
    const s = Math.max(0, ms) / 1000;
    if (s < 10) return `${s.toFixed(1)} s`;
    const whole = Math.round(s);
    if (whole < 120) return `${whole} s`;
    if (whole < 7200) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
    const minutes = Math.round(whole / 60);
    if (minutes < 2880) return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
    return `${Math.round(whole / 86400)} days`;
  };

  const stateWords = (state) => String(state).replace(/_/g, '-');

  const stateClass = (state) => {
    switch (state) {
      case 'closed': case 'clear': case 'active': case 'available': return 'ok';
      case 'gated': case 'throttled': case 'half_open': case 'paced': case 'full': return 'wait';
      case 'parked': return 'park';
      default: return 'bad';
    }
  };

  const badge = (state) => el('span', { class: `state ${stateClass(state)}`, text: stateWords(state) });

  // A countdown cell: redrawn every second from the snapshot's deadline.
  const countdown = (ms) => {
    if (ms === null || ms === undefined) return el('span', { class: 'muted', text: '—' });
    return el('span', { 'data-until': String(snapshotAt + ms), text: duration(ms) });
  };

  const tick = () => {
    const now = Date.now();
    for (const node of document.querySelectorAll('[data-until]')) {
      node.textContent = duration(Number(node.getAttribute('data-until')) - now);
    }
  };

  const left = (limits) => (limits || [])
    .map((l) => `${l.dimension}${l.period ? ` per ${l.period}` : ''}: ${l.remaining}${l.limit ? ` of ${l.limit}` : ''}`)
    .join('; ');

  // === reading the snapshot ===

  // Finds failover snapshots (objects with `targets` of named scopes),
  // breaker layers (objects with `scopes`), retry budgets, anywhere in the
  // JSON: the gateway nests them under routes, a HealthGroup under names.
  const walk = (node, path, out) => {
    if (!node || typeof node !== 'object' || Array.isArray(node)) return;
    if (Array.isArray(node.targets) && node.targets.every((t) => t && typeof t.name === 'string' && Array.isArray(t.scopes))) {
      out.failovers.push({ label: label(path), failover: node });
      return;
    }
    if (Array.isArray(node.scopes)) {
      out.breakers.push({ label: label(path), target: path[path.length - 1] || '', scopes: node.scopes });
      return;
    }
    if (typeof node.available === 'number' && typeof node.budget_exhausted === 'number') {
      out.budgets.push({ label: label(path), budget: node });
      return;
    }
    for (const [k, v] of Object.entries(node)) walk(v, [...path, k], out);
  };

  const label = (path) => path.filter((p) => p !== 'routes' && p !== 'failover' && p !== 'retry_budget').join(' · ') || 'this service';

  const read = (json) => {
    const out = { failovers: [], breakers: [], budgets: [] };
    walk(json, [], out);
    return out;
  };

  // === drawing ===

  const table = (caption, heads, rows) => el('table', {},
    el('caption', { class: 'muted', text: caption }),
    el('thead', {}, el('tr', {}, ...heads.map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, ...rows));

  const actionButtons = (target, scope) => {
    // A breaker layer served alone has no name for the admin routes.
    if (!admin || !target) return null;
    const buttons = [];
    const act = (action, words) => el('button', {
      type: 'button',
      class: `action-${action}`,
      'aria-label': `${words} ${scope.scope} on ${target}`,
      text: words,
      onclick: () => perform(target, scope.scope, action, words),
    });
    if (scope.mechanism === 'breaker') {
      if (scope.state === 'closed') buttons.push(act('open', 'Open'), act('isolate', 'Isolate'));
      else buttons.push(act('close', 'Close'));
    } else if (scope.mechanism === 'park' && scope.state === 'parked') {
      buttons.push(act('unpark', 'Unpark'));
    }
    return buttons.length ? el('div', { class: 'actions' }, ...buttons) : null;
  };

  // Who made a scope's last change: its traffic, an operator, or another
  // replica of the fleet; and how long a gate spent gated in the last hour.
  const changedBy = (target, s) => {
    const e = lastChange.get(`${target}\u0000${s.scope}\u0000${s.mechanism}`);
    return e ? `${e.origin}, ${new Date(e.at_ms).toLocaleTimeString()}` : '';
  };
  const why = (s) => [s.reason, s.gated_last_hour_ms ? `gated ${duration(s.gated_last_hour_ms)} in the last hour` : null]
    .filter(Boolean).join('; ');

  const scopeRow = (where, target, s) => el('tr', {
    'data-target': target,
    'data-scope': s.scope,
    'data-mechanism': s.mechanism,
    'data-state': s.state,
  },
  el('td', { text: where }),
  el('td', { text: s.mechanism }),
  el('td', { text: s.scope }),
  el('td', {}, badge(s.state)),
  el('td', { class: 'num reopens' }, countdown(s.retry_after_ms)),
  el('td', { text: why(s) }),
  el('td', { text: left(s.remaining) }),
  el('td', { class: 'changed-by', text: changedBy(target, s) }),
  ...(admin ? [el('td', {}, actionButtons(target, s))] : []));

  const drawScopes = (found) => {
    const rows = [];
    for (const { label: where, failover } of found.failovers) {
      for (const t of failover.targets) {
        for (const s of t.scopes) rows.push(scopeRow(`${where} · ${t.name}`, t.name, s));
      }
    }
    for (const b of found.breakers) {
      for (const s of b.scopes) rows.push(scopeRow(b.label, b.target, s));
    }
    const heads = ['Where', 'Mechanism', 'Scope', 'State', 'Reopens in', 'Why', 'Allowance left', 'Last change by'];
    if (admin) heads.push('Actions');
    $('scopes').replaceChildren(rows.length
      ? table('Every scope each breaker layer tracks', heads, rows)
      : el('p', { text: 'No scope has been called yet.' }));
  };

  const latency = (t, field) => {
    const b = t.scopes.find((s) => s.mechanism === 'breaker' && s[field]);
    return b ? `${b[field].p50_ms} / ${b[field].p99_ms} ms` : '—';
  };

  // Each target's served count, once per snapshot read, for its share of
  // the last five minutes.
  const recordServed = (found) => {
    const counts = new Map();
    for (const { label: where, failover } of found.failovers) {
      for (const t of failover.targets) counts.set(`${where}\u0000${t.name}`, t.served);
    }
    const now = Date.now();
    served.push({ at: now, counts });
    while (served.length > 1 && served[0].at < now - SHARE_WINDOW_MS) served.shift();
  };

  const recentShare = (prefix) => {
    const first = served[0]?.counts ?? new Map();
    const last = served[served.length - 1]?.counts ?? new Map();
    let total = 0;
    const delta = new Map();
    for (const [k, v] of last) {
      if (!k.startsWith(prefix)) continue;
      // A counter that went back (a restarted server) counts from zero.
      const before = first.get(k) ?? 0;
      const d = v >= before ? v - before : v;
      delta.set(k, d);
      total += d;
    }
    return { delta, total };
  };

  const drawRoutes = (found) => {
    const sections = found.failovers.map(({ label: where, failover }) => {
      const { delta, total } = recentShare(`${where}\u0000`);
      const rows = failover.targets.map((t) => {
        const d = delta.get(`${where}\u0000${t.name}`) ?? 0;
        const share = total > 0 ? `${Math.round((100 * d) / total)}%` : '—';
        return el('tr', { 'data-target': t.name },
          el('td', { text: t.name }),
          el('td', {}, badge(t.state)),
          el('td', { class: 'num', text: share }),
          el('td', { class: 'num', text: latency(t, 'latency') }),
          el('td', { class: 'num', text: latency(t, 'first_content') }),
          el('td', { class: 'num', text: String(t.served) }),
          el('td', { class: 'num', text: String(t.failed_over) }),
          el('td', { text: left(t.scopes.flatMap((s) => s.remaining || [])) }));
      });
      return el('section', {},
        el('h3', { text: where }),
        el('p', { class: 'muted', text: `Served ${failover.served}; by a fallback ${Math.round(100 * (failover.fallback_share || 0))}%; no target available ${failover.no_target_available}.` }),
        table(`Targets of ${where}, in failover order`,
          ['Target', 'State', 'Share, last 5 min', 'First byte p50 / p99', 'First token p50 / p99', 'Served', 'Failed over', 'Allowance left'],
          rows));
    });
    $('routes').replaceChildren(...(sections.length ? sections : [el('p', { text: 'No failover route.' })]));
  };

  const drawLimits = (found) => {
    const rows = found.budgets.map(({ label: where, budget }) => el('tr', {},
      el('td', { text: where }),
      el('td', { class: 'num', text: String(budget.available) }),
      el('td', { class: 'num', text: `${budget.retries} of ${budget.requests}` }),
      el('td', { class: 'num', text: String(budget.budget_exhausted) })));
    const bulkheads = [];
    for (const { label: where, failover } of found.failovers) {
      for (const t of failover.targets) {
        if (t.bulkhead) bulkheads.push(el('tr', {}, el('td', { text: `${where} · ${t.name}` }), el('td', { class: 'num', text: `${t.bulkhead.in_flight} of ${t.bulkhead.limit}` })));
      }
    }
    const parts = [];
    if (rows.length) parts.push(table('Retry budgets', ['Where', 'Retries available', 'Retries granted of requests', 'Refused (budget exhausted)'], rows));
    if (bulkheads.length) parts.push(table('Bulkheads', ['Target', 'In flight'], bulkheads));
    $('limits').replaceChildren(...(parts.length ? parts : [el('p', { text: 'No retry budget or bulkhead.' })]));
  };

  const draw = () => {
    if (!snapshot) return;
    // Redrawing replaces the buttons: the one that had focus gets it back.
    const focused = document.activeElement?.getAttribute('aria-label');
    const found = read(snapshot);
    drawScopes(found);
    drawRoutes(found);
    drawLimits(found);
    if (focused) {
      for (const b of document.querySelectorAll('button[aria-label]')) {
        if (b.getAttribute('aria-label') === focused) { b.focus(); break; }
      }
    }
  };

  // === the snapshot, every two seconds ===

  // The live region speaks only when what it says changes; the time of the
  // last update is beside it, silent.
  const setStatus = (text) => {
    if ($('status').textContent !== text) $('status').textContent = text;
  };

  const refresh = async () => {
    lastRefresh = Date.now();
    const ask = ++asked;
    try {
      const res = await fetch(new URL('health', base), { headers: auth(), cache: 'no-store' });
      if (ask !== asked) return;
      if (res.status === 401) {
        setStatus('This server asks for a key to read its state: enter it above.');
        return;
      }
      if (!res.ok) throw new Error(`health answered ${res.status}`);
      const json = await res.json();
      if (ask !== asked) return;
      snapshot = json;
      snapshotAt = Date.now();
      recordServed(read(snapshot));
      draw();
      setStatus('Live.');
      $('updated').textContent = `Updated ${new Date(snapshotAt).toLocaleTimeString()}.`;
    } catch (e) {
      if (ask === asked) setStatus(`Cannot read the state (${e.message}); retrying.`);
    }
  };

  // An event asks for a fresh snapshot, at most once a second.
  const refreshSoon = () => {
    if (refreshTimer) return;
    const wait = Math.max(0, 1000 - (Date.now() - lastRefresh));
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, wait);
  };

  // === the timeline, pushed ===

  const describe = (e) => {
    const parts = [
      new Date(e.at_ms).toLocaleTimeString(),
      `${e.target}: ${e.mechanism} ${e.scope} ${stateWords(e.from)} → ${stateWords(e.to)}`,
    ];
    if (e.remaining_ms !== null && e.remaining_ms !== undefined) parts.push(`for ${duration(e.remaining_ms)}`);
    if (e.reason) parts.push(`(${e.reason})`);
    if (e.model) parts.push(`model ${e.model}`);
    parts.push(`by ${e.origin}`);
    return parts.join(' ');
  };

  const addEvent = (e) => {
    lastChange.set(`${e.target}\u0000${e.scope}\u0000${e.mechanism}`, e);
    const list = $('timeline');
    list.prepend(el('li', { 'data-to': e.to, 'data-mechanism': e.mechanism, text: describe(e) }));
    while (list.children.length > TIMELINE_MAX) list.lastElementChild.remove();
  };

  const follow = async () => {
    let lastId = null;
    for (;;) {
      const controller = new AbortController();
      events = controller;
      try {
        const headers = auth();
        if (lastId !== null) headers['Last-Event-ID'] = String(lastId);
        const res = await fetch(new URL('events', base), { headers, cache: 'no-store', signal: controller.signal });
        if (!res.ok) throw new Error(`events answered ${res.status}`);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('id:')) lastId = Number(line.slice(3).trim());
              else if (line.startsWith('data:')) data += line.slice(5).trim();
            }
            if (data) {
              addEvent(JSON.parse(data));
              refreshSoon();
            }
          }
        }
      } catch (e) {
        // Aborted here: the key changed, so reconnect with it at once.
        if (e.name === 'AbortError') continue;
        setStatus(`Event stream interrupted (${e.message}); reconnecting.`);
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  };

  // === the admin key and actions ===

  const keyStatus = (text) => { $('key-status').textContent = text; };

  const useKey = async (event) => {
    event.preventDefault();
    const input = $('admin-key');
    const typed = input.value.trim();
    input.value = '';
    if (!typed) return;
    key = typed;
    $('forget-key').hidden = false;
    try {
      const res = await fetch(new URL('admin/targets', base), { headers: auth(), cache: 'no-store' });
      admin = res.ok;
      keyStatus(res.ok ? 'Admin controls on.' : res.status === 401 ? 'Key kept for reading; it is not the admin key.' : 'Key kept for reading; this server has no admin controls.');
    } catch (e) {
      admin = false;
      keyStatus(`Cannot check the key (${e.message}).`);
    }
    events?.abort();
    draw();
    refresh();
  };

  const forgetKey = () => {
    key = null;
    admin = false;
    $('forget-key').hidden = true;
    keyStatus('Key forgotten.');
    events?.abort();
    draw();
  };

  const perform = async (target, scope, action, words) => {
    if (!window.confirm(`${words} ${scope} on ${target}?`)) return;
    const url = new URL(`admin/targets/${encodeURIComponent(target)}/${action}`, base);
    url.searchParams.set('scope', scope);
    try {
      const res = await fetch(url, { method: 'POST', headers: auth(), cache: 'no-store' });
      keyStatus(res.ok ? `${words}: done.` : `${words}: refused (${res.status}).`);
    } catch (e) {
      keyStatus(`${words}: failed (${e.message}).`);
    }
    refresh();
  };

  // === start ===

  $('key-form').addEventListener('submit', useKey);
  $('forget-key').addEventListener('click', forgetKey);
  refresh();
  setInterval(refresh, POLL_MS);
  setInterval(tick, 1000);
  follow();
})();
