// SPDX-License-Identifier: BSD-3-Clause
// inca-manager's topology view: polls GET /v1/topology every second and
// draws super-spines (when there are any), spines, leaves and hosts in rows, the links between them, each
// switch's state and load, and the selected job's reduction tree. Failures
// (a switch down, a failed job) are red; a job on the host ring (no tree:
// refused, full, a switch down) amber. Names and reasons come from the
// manager and are only ever set as text, never as markup.
'use strict';

const POLL_MS = 1000;
const HOSTS_DRAWN_PER_LEAF = 12;   // more under one leaf: one box "N hosts"
const SVG = 'http://www.w3.org/2000/svg';

const state = { token: null, selected: null, data: null, timer: null, okAt: 0 };

// Errors of the page itself are shown and counted (the browser test reads
// body[data-errors]); the console keeps them too.
function pageError(msg) {
  const pre = document.getElementById('errors');
  pre.hidden = false;
  pre.textContent += msg + '\n';
  document.body.dataset.errors = String(Number(document.body.dataset.errors) + 1);
}
window.addEventListener('error', e => pageError('error: ' + e.message));
window.addEventListener('unhandledrejection', e => pageError('rejection: ' + e.reason));

function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function html(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function banner(msg) {
  const b = document.getElementById('banner');
  b.textContent = msg || '';
  b.classList.toggle('shown', !!msg);
}

// ---- the token: #token=... (then dropped from the address), this tab's
// sessionStorage, or the form ----
function readToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('inca-token', decodeURIComponent(m[1]));
    const rest = location.hash.replace(/(^#|&)token=[^&]+/, '$1').replace(/^#&/, '#');
    history.replaceState(null, '', location.pathname + (rest === '#' ? '' : rest));
  }
  const j = /(?:^#|&)job=([^&]+)/.exec(location.hash);
  if (j) state.selected = decodeURIComponent(j[1]);
  return sessionStorage.getItem('inca-token');
}
function askToken(why) {
  document.getElementById('view').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('status').textContent = why;
}
document.getElementById('login').addEventListener('submit', e => {
  e.preventDefault();
  const t = document.getElementById('token').value.trim();
  if (!t) return;
  sessionStorage.setItem('inca-token', t);
  state.token = t;
  document.getElementById('login').hidden = true;
  poll();
});

// ---- polling ----
async function poll() {
  clearTimeout(state.timer);
  let resp;
  try {
    resp = await fetch('/v1/topology', { headers: { Authorization: 'Bearer ' + state.token },
                                         cache: 'no-store' });
  } catch (err) {
    stale('manager unreachable: ' + err.message);
    state.timer = setTimeout(poll, POLL_MS);
    return;
  }
  if (resp.status === 401) {
    sessionStorage.removeItem('inca-token');
    askToken('the manager refused the token');
    return;
  }
  let body;
  try {
    body = await resp.json();
  } catch (err) {
    stale('the manager answered ' + resp.status + ' with no JSON');
    state.timer = setTimeout(poll, POLL_MS);
    return;
  }
  if (!resp.ok) {
    stale('the manager answered ' + resp.status + ': ' + (body.error || ''));
  } else {
    state.data = body;
    state.okAt = Date.now();
    banner('');
    render();
  }
  state.timer = setTimeout(poll, POLL_MS);
}
function stale(msg) {
  banner(msg + (state.okAt ? ' — showing the state of ' +
                new Date(state.okAt).toLocaleTimeString() : ''));
  const s = document.getElementById('status');
  s.textContent = 'not updated';
  s.classList.add('stale');
}

// ---- the selected job's tree: switches, hosts and edges in it ----
function treeOf(job, hostByIp) {
  const t = { switches: new Set(), hosts: new Map(), edges: new Set(), failed: false };
  if (!job || !job.tree) return t;
  t.failed = job.state === 'failed';
  const walk = node => {
    t.switches.add(node.switch);
    addRanks(node.ranks, node.switch);
    for (const c of node.children || []) {
      t.edges.add(c.switch + '|' + node.switch);
      walk(c);
    }
  };
  const addRanks = (ranks, sw) => {
    for (const r of ranks || []) {
      const h = hostByIp.get(r.ip);
      if (!h) continue;
      if (!t.hosts.has(h.name)) t.hosts.set(h.name, []);
      t.hosts.get(h.name).push(r.rank);
      t.edges.add(h.name + '|' + sw);
    }
  };
  walk(job.tree);
  return t;
}

// ---- drawing ----
function render() {
  const d = state.data;
  document.getElementById('view').hidden = false;
  const s = document.getElementById('status');
  s.classList.remove('stale');
  s.textContent = 'updated ' + new Date().toLocaleTimeString();
  const down = d.switches.filter(x => x.state === 'down').length;
  const n = (k, one, many) => k + ' ' + (k === 1 ? one : many);
  document.getElementById('summary').textContent =
    n(d.switches.length, 'switch', 'switches') + ' (' + down + ' down), ' +
    n(d.hosts.length, 'host', 'hosts') + ', ' + n(d.jobs.length, 'job', 'jobs');

  if (!d.jobs.some(j => j.id === state.selected)) {
    const ready = d.jobs.find(j => j.state === 'ready');
    state.selected = ready ? ready.id : d.jobs.length ? d.jobs[0].id : null;
  }
  renderJobs(d);
  renderFailures(d);
  renderGraph(d);
  document.body.dataset.ready = '1';
}

function renderJobs(d) {
  const tb = document.getElementById('jobs');
  tb.replaceChildren();
  if (!d.jobs.length) {
    const tr = html('tr');
    const td = html('td', 'no job', 'empty');
    td.colSpan = 4;
    tr.append(td);
    tb.append(tr);
  }
  for (const j of d.jobs) {
    const tr = html('tr', undefined, 'job ' + j.state + (j.id === state.selected ? ' selected' : ''));
    tr.id = 'job-' + j.id;
    // a job's rails (one per local rank) are jobs of their own, planned as one
    const rail = j.rails ? ' (rail ' + j.rail + ' of ' + j.rails + ')' : '';
    tr.append(html('td', j.id + rail), html('td', j.tenant), html('td', j.registered + '/' + j.size),
              html('td', j.state, 'state'));
    tr.addEventListener('click', () => { state.selected = j.id; render(); });
    tb.append(tr);
  }
  const j = d.jobs.find(x => x.id === state.selected);
  const p = document.getElementById('job-detail');
  p.textContent = !j ? '' : 'job ' + j.id + (j.rails ? ', rail ' + j.rail + ' of ' + j.rails : '') +
    ': group ' + j.group + ', window ' + j.window +
    (j.switches ? ', switches ' + j.switches.join(', ') : '') +
    (j.setup_ms !== undefined ? ', set up in ' + j.setup_ms.toFixed(1) + ' ms' : '') +
    (j.reason ? ' — ' + j.reason : '');
}

function renderFailures(d) {
  const ul = document.getElementById('failures');
  ul.replaceChildren();
  if (!d.failures.length) ul.append(html('li', 'none', 'empty'));
  for (const f of d.failures.slice().reverse()) {
    const ago = Math.max(0, d.time - f.time);
    // a switch heartbeating again is listed too, as a recovery
    ul.append(html('li', f.what + ': ' + f.reason + ' (' + ago.toFixed(0) + ' s ago)',
                   /^switch back/.test(f.reason) ? 'recovered' : undefined));
  }
}

function renderGraph(d) {
  const svg = document.getElementById('graph');
  const hostByIp = new Map(d.hosts.map(h => [h.ip, h]));
  const job = d.jobs.find(j => j.id === state.selected);
  const tree = treeOf(job, hostByIp);
  const swState = new Map(d.switches.map(x => [x.name, x.state]));

  const supers = d.switches.filter(x => x.role === 'superspine');
  const spines = d.switches.filter(x => x.role === 'spine');
  const leaves = d.switches.filter(x => x.role === 'leaf');
  // hosts per leaf; past HOSTS_DRAWN_PER_LEAF one box stands for them all
  const under = new Map(leaves.map(l => [l.name, []]));
  for (const h of d.hosts) (under.get(h.leaf) || []).push(h);
  const cols = leaves.map(l => {
    const hs = under.get(l.name);
    return hs.length > HOSTS_DRAWN_PER_LEAF ? [{ group: hs, name: l.name + ':hosts' }] : hs;
  });

  const HW = 74, HG = 10, SW = 150, SG = 30, PAD = 20;
  const colW = cols.map(c => Math.max(SW + SG, c.length * (HW + HG)));
  const width = Math.max(PAD * 2 + colW.reduce((a, b) => a + b, 0),
                         PAD * 2 + Math.max(spines.length, supers.length) * (SW + SG), 600);
  const top = supers.length ? 150 : 0;
  const Y = { superspine: 40, spine: 40 + top, leaf: 190 + top, host: 340 + top };
  const pos = new Map();
  let x = PAD + (width - PAD * 2 - colW.reduce((a, b) => a + b, 0)) / 2;
  leaves.forEach((l, i) => {
    pos.set(l.name, { x: x + colW[i] / 2, y: Y.leaf });
    const hs = cols[i];
    const start = x + (colW[i] - hs.length * (HW + HG)) / 2 + (HW + HG) / 2;
    hs.forEach((h, k) => pos.set(h.name, { x: start + k * (HW + HG), y: Y.host }));
    x += colW[i];
  });
  const sx = (width - spines.length * (SW + SG)) / 2 + (SW + SG) / 2;
  spines.forEach((s, i) => pos.set(s.name, { x: sx + i * (SW + SG), y: Y.spine }));
  const xx = (width - supers.length * (SW + SG)) / 2 + (SW + SG) / 2;
  supers.forEach((s, i) => pos.set(s.name, { x: xx + i * (SW + SG), y: Y.superspine }));

  svg.replaceChildren();
  svg.setAttribute('viewBox', '0 0 ' + width + ' ' + (Y.host + 60));
  const gl = el('g', { id: 'links' }), gn = el('g', { id: 'nodes' });
  svg.append(gl, gn);

  const line = (a, b, cls, id) => {
    const p = pos.get(a), q = pos.get(b);
    if (!p || !q) return;
    gl.append(el('line', { x1: p.x, y1: p.y, x2: q.x, y2: q.y, class: 'link ' + cls, id: id }));
  };
  const linkCls = (a, b, key) => {
    const down = swState.get(a) === 'down' || swState.get(b) === 'down';
    const inTree = tree.edges.has(key);
    return (down ? 'down ' : '') + (inTree ? 'in-tree ' : '') + (inTree && tree.failed ? 'failed' : '');
  };
  for (const l of d.links) {
    // {leaf, spine} or {spine, superspine}
    const lo = l.leaf || l.spine, hi = l.leaf ? l.spine : l.superspine;
    line(lo, hi, linkCls(lo, hi, lo + '|' + hi), 'link-' + lo + '-' + hi);
  }
  cols.forEach((hs, i) => {
    const leaf = leaves[i].name;
    for (const h of hs) {
      const inTree = h.group ? h.group.some(g => tree.edges.has(g.name + '|' + leaf))
                             : tree.edges.has(h.name + '|' + leaf);
      const down = swState.get(leaf) === 'down';
      line(h.name, leaf, (down ? 'down ' : '') + (inTree ? 'in-tree ' : '') +
           (inTree && tree.failed ? 'failed' : ''), 'link-' + h.name + '-' + leaf);
    }
  });

  for (const s of d.switches) {
    const p = pos.get(s.name);
    if (!p) continue;
    const inTree = tree.switches.has(s.name);
    const g = el('g', { class: 'node switch ' + s.role + ' ' + s.state +
                        (inTree ? ' in-tree' : '') + (inTree && tree.failed ? ' failed' : ''),
                        id: 'sw-' + s.name, transform: 'translate(' + p.x + ',' + p.y + ')' });
    const title = el('title', {}, s.name + ' (' + s.role + ', ' + s.ip + '): ' + s.state +
      ', ' + s.groups + '/' + s.max_groups + ' groups, ' + s.slots + '/' + s.max_slots +
      ' slots, config ' + s.applied + '/' + s.version + (s.error ? ', error: ' + s.error : ''));
    g.append(title, el('rect', { class: 'box', x: -SW / 2, y: -30, width: SW, height: 62, rx: 6 }),
      el('text', { class: 'name', y: -12 }, s.name),
      el('text', { class: 'sub', y: 4 }, s.state === 'up'
        ? s.groups + (s.groups === 1 ? ' group, ' : ' groups, ') + s.slots + ' slots' : s.state));
    const frac = s.max_slots ? Math.min(1, s.slots / s.max_slots) : 0;
    g.append(el('rect', { class: 'load-bg', x: -SW / 2 + 10, y: 14, width: SW - 20, height: 7 }),
             el('rect', { class: 'load', x: -SW / 2 + 10, y: 14, width: (SW - 20) * frac, height: 7 }));
    gn.append(g);
  }
  cols.forEach(hs => {
    for (const h of hs) {
      const p = pos.get(h.name);
      const members = h.group ? h.group.filter(x => tree.hosts.has(x.name)) : [];
      const ranks = h.group ? members.flatMap(x => tree.hosts.get(x.name)) : tree.hosts.get(h.name) || [];
      const inTree = ranks.length > 0;
      const g = el('g', { class: 'node host' + (inTree ? ' in-tree' : '') +
                          (inTree && tree.failed ? ' failed' : ''),
                          id: 'host-' + h.name, transform: 'translate(' + p.x + ',' + p.y + ')' });
      g.append(el('title', {}, h.group ? h.group.length + ' hosts under ' + h.name.split(':')[0]
                                      : h.name + ' ' + h.ip),
               el('rect', { class: 'box', x: -HW / 2, y: -20, width: HW, height: 40, rx: 4 }),
               el('text', { class: 'name', y: -3 }, h.group ? h.group.length + ' hosts' : h.name),
               el('text', { class: inTree ? 'rank' : 'sub', y: 13 },
                  inTree ? 'rank ' + ranks.sort((a, b) => a - b).join(',') : h.group ? '' : h.ip));
      gn.append(g);
    }
  });
}

state.token = readToken();
if (state.token) poll(); else askToken('a token is needed');
