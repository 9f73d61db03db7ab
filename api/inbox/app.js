// The approvals inbox: what waits on the signed-in key, live, and the forms to answer.
// It is a client of the host's public API only: GET /v1/interrupts (an SSE stream of
// the pending interrupts the key may resolve) and POST
// /v1/runs/{runId}/interrupts/{nodeId} to resolve one. Data is always written to the
// page as text, never as HTML.
//
// It lists operator work: approvals, questions, decisions and the conversations staff
// answer. Chats waiting for their end users are shown only when asked for ("Also show
// chats waiting for their users", ?answeredBy=any), read-only: the inbox does not
// answer in a customer's name.
'use strict';

(() => {
  const KEY_STORE = 'wop.inbox.key';
  const $ = (id) => document.getElementById(id);
  const state = {
    key: sessionStorage.getItem(KEY_STORE) || '',
    filter: 'all',
    withUsers: false, // also list the chats waiting for their end users
    items: [],
    cards: new Map(), // item id -> {el, sig}
    abort: null,
    retry: 0,
  };

  // ---- DOM helpers ----

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

  // renderValue renders any JSON value readably: objects as key/value lists, arrays as
  // lists, long or nested structures as indented JSON.
  function renderValue(v, depth = 0) {
    if (v === null || v === undefined) return h('span', { class: 'mono', text: 'null' });
    if (typeof v === 'string') return h('span', { text: v });
    if (typeof v !== 'object') return h('span', { class: 'mono', text: JSON.stringify(v) });
    if (depth > 2) return h('pre', { text: JSON.stringify(v, null, 2) });
    if (Array.isArray(v)) {
      if (v.length === 0) return h('span', { class: 'mono', text: '[]' });
      if (v.every((x) => typeof x !== 'object' || x === null)) {
        return h('span', { text: v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join(', ') });
      }
      return h('ul', { class: 'list' }, v.map((x) => h('li', null, renderValue(x, depth + 1))));
    }
    const keys = Object.keys(v);
    if (keys.length === 0) return h('span', { class: 'mono', text: '{}' });
    return h('dl', { class: 'kv' }, keys.map((k) => [h('dt', { text: k }), h('dd', null, renderValue(v[k], depth + 1))]));
  }

  function block(title, ...content) {
    return h('div', { class: 'block' }, h('h4', { text: title }), ...content);
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return '';
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' d ago';
  }

  // ---- API ----

  async function call(method, path, body, headers) {
    const init = { method, headers: Object.assign({ Authorization: 'Bearer ' + state.key, Accept: 'application/json' }, headers || {}) };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    let data = null;
    try { data = await resp.json(); } catch (_) { /* empty body */ }
    return { status: resp.status, data };
  }

  function errorText(res) {
    if (res.data && res.data.message) return res.data.message;
    return 'the host answered ' + res.status;
  }

  // ---- sign in ----

  async function signIn(key) {
    state.key = key;
    const res = await call('GET', '/v1/interrupts?limit=1');
    if (res.status === 200) {
      sessionStorage.setItem(KEY_STORE, key);
      return null;
    }
    state.key = '';
    if (res.status === 401) return 'This key is not accepted here (' + errorText(res) + ').';
    if (res.status === 403) return 'This key may not resolve interrupts: it lacks the approvals:respond scope.';
    return 'Sign-in failed: ' + errorText(res);
  }

  function showSignIn(message) {
    stopStream();
    $('inbox').hidden = true;
    $('signout').hidden = true;
    $('live').hidden = true;
    $('signin').hidden = false;
    $('signin-error').hidden = !message;
    $('signin-error').textContent = message || '';
    $('key').focus();
  }

  function showInbox() {
    $('signin').hidden = true;
    $('inbox').hidden = false;
    $('signout').hidden = false;
    $('live').hidden = false;
    connect();
  }

  // ---- the live list ----

  function setLive(up) {
    const live = $('live');
    live.textContent = up ? '● live' : '○ reconnecting…';
    live.classList.toggle('down', !up);
    live.dataset.state = up ? 'live' : 'down';
  }

  function stopStream() {
    if (state.abort) state.abort.abort();
    state.abort = null;
  }

  async function connect() {
    stopStream();
    const ctl = new AbortController();
    state.abort = ctl;
    try {
      const resp = await fetch(state.withUsers ? '/v1/interrupts?answeredBy=any' : '/v1/interrupts', {
        headers: { Authorization: 'Bearer ' + state.key, Accept: 'text/event-stream' },
        signal: ctl.signal,
      });
      if (resp.status === 401 || resp.status === 403) {
        sessionStorage.removeItem(KEY_STORE);
        showSignIn('The key is no longer accepted; sign in again.');
        return;
      }
      if (!resp.ok || !resp.body) throw new Error('stream answered ' + resp.status);
      setLive(true);
      state.retry = 0;
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = 'message';
          const data = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          }
          if (event === 'interrupts' && data.length) render(JSON.parse(data.join('\n')));
        }
      }
    } catch (err) {
      if (ctl.signal.aborted) return;
    }
    if (ctl.signal.aborted) return;
    setLive(false);
    state.retry = Math.min(state.retry + 1, 5);
    setTimeout(() => { if (state.abort === ctl) connect(); }, 1000 * state.retry);
  }

  function itemID(it) { return it.runId + '/' + it.interruptId; }

  function group(it) {
    if (it.waitingKind === 'approval' || it.waitingKind === 'clarification' || it.waitingKind === 'conversation') return it.waitingKind;
    return 'other';
  }

  function render(list) {
    const items = list.interrupts || [];
    state.items = items;
    $('truncated').hidden = !list.truncated;
    const counts = { all: items.length, approval: 0, clarification: 0, conversation: 0, other: 0 };
    for (const it of items) counts[group(it)]++;
    for (const [k, n] of Object.entries(counts)) {
      const c = document.querySelector('[data-count="' + k + '"]');
      if (c) c.textContent = n ? String(n) : '';
    }
    const ol = $('items');
    const seen = new Set();
    let prev = null;
    for (const it of items) {
      const id = itemID(it);
      seen.add(id);
      const sig = JSON.stringify(it);
      let card = state.cards.get(id);
      // A card someone is answering (typing, a form open, a request in flight) stays.
      if (!card || (card.sig !== sig && !card.busy && !card.el.dataset.dirty)) {
        const el = buildCard(it);
        if (card) {
          carryInputs(card.el, el);
          card.el.replaceWith(el);
        }
        card = { el, sig, busy: false };
        state.cards.set(id, card);
      }
      if (prev ? prev.nextSibling !== card.el : ol.firstChild !== card.el) {
        if (prev) prev.after(card.el); else ol.prepend(card.el);
      }
      prev = card.el;
    }
    for (const [id, card] of state.cards) {
      if (!seen.has(id)) {
        card.el.remove();
        state.cards.delete(id);
      }
    }
    applyFilter();
  }

  // carryInputs keeps what the person typed when a card is rebuilt.
  function carryInputs(from, to) {
    for (const input of from.querySelectorAll('[name]')) {
      const twin = to.querySelector('[name="' + input.name + '"]');
      if (twin && input.value && twin.type !== 'checkbox') twin.value = input.value;
    }
  }

  function applyFilter() {
    let visible = 0;
    for (const card of state.cards.values()) {
      const show = state.filter === 'all' || card.el.dataset.group === state.filter;
      card.el.hidden = !show;
      if (show) visible++;
    }
    $('empty').hidden = visible > 0;
  }

  // ---- cards ----

  function buildCard(it) {
    const d = isObject(it.data) ? it.data : {};
    const g = group(it);
    const labels = { approval: 'Approval', clarification: 'Question', conversation: 'Conversation', 'external-event': 'External event', custom: 'Custom' };
    let title = 'Waiting at ' + it.nodeId;
    if (g === 'approval') title = d.title || 'Approve ' + it.nodeId;
    else if (g === 'clarification') title = 'Questions at ' + it.nodeId;
    else if (g === 'conversation' && it.answeredBy === 'user') title = 'Waiting for its user' + (it.packId ? ' · ' + it.packId : '');
    else if (g === 'conversation') title = 'Waiting for a reply' + (it.packId ? ' · ' + it.packId : '');
    else if (it.waitingKind === 'external-event') title = 'Decision needed' + (it.packState ? ' · ' + it.packState : '');
    const meta = h('p', { class: 'meta' },
      h('span', { text: it.workflowId }),
      it.packState ? h('span', { text: 'state ' + it.packState }) : null,
      h('span', { class: 'mono', text: it.runId }),
      h('span', { text: 'since ' + ago(it.requestedAt), title: it.requestedAt }),
      it.expiresAt ? h('span', { text: 'expires ' + new Date(it.expiresAt).toLocaleString() }) : null);
    const li = h('li', { class: 'item', dataset: { runId: it.runId, nodeId: it.nodeId, kind: it.waitingKind, group: g, answeredBy: it.answeredBy || 'operator' } },
      h('header', null, h('span', { class: 'badge ' + g, text: labels[it.waitingKind] || it.kind }), h('h3', { text: title })),
      meta);
    li.addEventListener('input', () => { li.dataset.dirty = 'true'; });
    const result = h('p', { class: 'result', role: 'status' });
    const send = (value, button) => resolve(it, value, li, result, button);
    if (it.recentTurns && it.recentTurns.length) li.append(turnsView(it.recentTurns));
    if (g === 'approval') approvalBody(li, it, d, send);
    else if (g === 'clarification') clarificationBody(li, d, send);
    else if (g === 'conversation' && it.answeredBy === 'user') {
      li.append(h('p', { class: 'note', text: 'This chat waits for its user, who answers in their own app; it is shown here to follow it, not to answer in their name.' }));
    } else if (g === 'conversation') conversationBody(li, send);
    else eventBody(li, it, d, send);
    li.append(result);
    return li;
  }

  function turnsView(turns) {
    return h('div', { class: 'turns' }, turns.map((t) => {
      const c = t.content;
      const text = isObject(c) && typeof c.text === 'string' ? c.text : JSON.stringify(c);
      return h('div', { class: 'turn ' + (t.role || 'agent') }, h('span', { class: 'who', text: t.speakerId || t.from || t.role }), text);
    }));
  }

  // toolCall finds a tool call in approval data or its artifactData: its name, its
  // arguments and its PromptPack action_scope, in the spellings hosts use ({toolName,
  // arguments}, {tool: {name, arguments}}, {toolCall: {...}}, ...). from is the object
  // that held it.
  function toolCall(d) {
    for (const s of [d, isObject(d.artifactData) ? d.artifactData : {}]) {
      const nested = [s.toolCall, s.tool_call, s.tool].find(isObject);
      const src = nested || s;
      const name = (nested && nested.name) || s.toolName || s.tool_name || (typeof s.tool === 'string' ? s.tool : undefined);
      if (!name) continue;
      const args = src.arguments ?? src.args ?? s.arguments ?? s.args ?? s.toolArgs;
      const scope = src.action_scope ?? src.actionScope ?? s.action_scope ?? s.actionScope;
      return { name, args, scope, from: s };
    }
    return null;
  }

  const approvalKeys = new Set(['title', 'description', 'artifactId', 'artifactType', 'artifactData', 'actions', 'requiredApprovals',
    'approversList', 'rejectionPolicy', 'toolName', 'tool_name', 'tool', 'toolCall', 'tool_call', 'arguments', 'args', 'toolArgs',
    'action_scope', 'actionScope']);

  function approvalBody(li, it, d, send) {
    if (d.description) li.append(h('p', { class: 'desc', text: d.description }));
    const tc = toolCall(d);
    // A tool call's arguments have a revision: an approval names the one it saw, so
    // arguments another approver edited meanwhile are never approved unseen.
    const art = isObject(d.artifactData) ? d.artifactData : {};
    const revision = d.artifactType === 'tool-call' ? (Number.isInteger(art.revision) ? art.revision : 0) : undefined;
    if (revision > 0) {
      li.append(h('p', { class: 'edited', dataset: { revision: String(revision) },
        text: 'Arguments edited by ' + (art.editedBy || 'an approver') + ' (revision ' + revision + '): earlier approvals no longer count.' }));
    }
    if (tc) {
      li.append(block('Tool call',
        h('p', null, h('span', { class: 'tool-name mono', text: tc.name }), ' ',
          tc.scope ? h('span', { class: 'badge scope', text: 'action scope: ' + (typeof tc.scope === 'string' ? tc.scope : JSON.stringify(tc.scope)) }) : null),
        tc.args === undefined ? null : renderValue(tc.args)));
    }
    if (d.artifactData !== undefined && !(tc && tc.from === d.artifactData)) {
      li.append(block('Details', renderValue(d.artifactData)));
    }
    const rest = {};
    for (const [k, v] of Object.entries(d)) if (!approvalKeys.has(k)) rest[k] = v;
    if (Object.keys(rest).length) li.append(block('More', renderValue(rest)));
    if (d.requiredApprovals > 1 || (d.approversList && d.approversList.length)) {
      li.querySelector('.meta').append(h('span', {
        text: (d.requiredApprovals > 1 ? d.requiredApprovals + ' approvals needed' : '') +
          (d.approversList && d.approversList.length ? (d.requiredApprovals > 1 ? ', ' : '') + 'approvers: ' + d.approversList.join(', ') : ''),
      }));
    }
    const actions = Array.isArray(d.actions) && d.actions.length ? d.actions : ['accept', 'reject'];
    const bar = h('div', { class: 'actions' });
    const form = h('div', { class: 'form', hidden: true });
    const openForm = (label, field, submitLabel, make) => {
      form.replaceChildren(h('label', { text: label }), field,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'primary', dataset: { submit: submitLabel }, text: submitLabel, onclick: (e) => {
            const value = make();
            if (value) send(value, e.target);
          } }),
          h('button', { type: 'button', class: 'quiet', text: 'Cancel', onclick: () => { form.hidden = true; delete li.dataset.dirty; } })));
      form.hidden = false;
      li.dataset.dirty = 'true';
      field.focus();
    };
    for (const a of actions) {
      if (a === 'accept') {
        const accept = revision === undefined ? { action: 'accept' } : { action: 'accept', revision };
        bar.append(h('button', { type: 'button', class: 'approve', dataset: { action: a }, text: 'Approve', onclick: (e) => send(accept, e.target) }));
      } else if (a === 'reject') {
        bar.append(h('button', { type: 'button', class: 'reject', dataset: { action: a }, text: 'Reject…', onclick: () => {
          const reason = h('textarea', { name: 'reason', placeholder: 'Why is this rejected? The run records it.' });
          openForm('Reason', reason, 'Reject', () => {
            const feedback = reason.value.trim();
            return feedback ? { action: 'reject', feedback } : { action: 'reject' };
          });
        } }));
      } else if (a === 'edit-accept') {
        bar.append(h('button', { type: 'button', dataset: { action: a }, text: 'Edit and approve…', onclick: () => {
          const text = h('textarea', { name: 'edited', class: 'json', spellcheck: 'false' });
          text.value = JSON.stringify(d.artifactData ?? {}, null, 2);
          openForm('The data to approve instead (JSON)', text, 'Approve edited', () => {
            try { return { action: 'edit-accept', editedArtifactData: JSON.parse(text.value) }; } catch (err) { showResult(li, 'That is not valid JSON: ' + err.message, false); return null; }
          });
        } }));
      } else if (a === 'refine') {
        bar.append(h('button', { type: 'button', dataset: { action: a }, text: 'Request changes…', onclick: () => {
          const text = h('textarea', { name: 'refine', placeholder: 'What should change?' });
          openForm('Changes', text, 'Send', () => (text.value.trim() ? { action: 'refine', refineFeedback: { scope: 'whole', text: text.value.trim() } } : null));
        } }));
      } else if (a === 'ask') {
        bar.append(h('button', { type: 'button', dataset: { action: a }, text: 'Ask a question…', onclick: () => {
          const text = h('textarea', { name: 'ask', placeholder: 'Your question' });
          openForm('Question', text, 'Ask', () => (text.value.trim() ? { action: 'ask', feedback: text.value.trim() } : null));
        } }));
      } else {
        bar.append(h('button', { type: 'button', dataset: { action: a }, text: a, onclick: (e) => send({ action: a }, e.target) }));
      }
    }
    li.append(bar, form);
  }

  function clarificationBody(li, d, send) {
    const questions = Array.isArray(d.questions) ? d.questions : [];
    const form = h('div', { class: 'form' });
    const fields = [];
    for (const q of questions) {
      const schema = isObject(q.schema) ? q.schema : {};
      let input;
      if (Array.isArray(schema.enum)) {
        input = h('select', { name: 'q-' + q.id }, schema.enum.map((v) => h('option', { value: JSON.stringify(v), text: String(v) })));
      } else if (schema.type === 'boolean') {
        input = h('input', { type: 'checkbox', name: 'q-' + q.id });
      } else if (schema.type === 'number' || schema.type === 'integer') {
        input = h('input', { type: 'number', name: 'q-' + q.id, step: schema.type === 'integer' ? '1' : 'any' });
      } else {
        input = h('textarea', { name: 'q-' + q.id });
      }
      fields.push({ q, input, schema });
      form.append(h('label', { text: q.question || q.id }), input);
    }
    form.append(h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', text: 'Answer', onclick: (e) => {
      const answers = {};
      for (const { q, input, schema } of fields) {
        if (Array.isArray(schema.enum)) answers[q.id] = JSON.parse(input.value);
        else if (schema.type === 'boolean') answers[q.id] = input.checked;
        else if (schema.type === 'number' || schema.type === 'integer') answers[q.id] = Number(input.value);
        else answers[q.id] = input.value;
      }
      send({ answers }, e.target);
    } })));
    li.append(form);
  }

  function conversationBody(li, send) {
    const text = h('textarea', { name: 'reply', placeholder: 'Your reply' });
    li.append(h('div', { class: 'form' }, text,
      h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', text: 'Send reply', onclick: (e) => {
        if (text.value.trim()) send({ text: text.value.trim() }, e.target);
      } }))));
  }

  function eventBody(li, it, d, send) {
    const schema = isObject(it.resumeSchema) ? it.resumeSchema : {};
    const events = isObject(schema.properties) && isObject(schema.properties.event) && Array.isArray(schema.properties.event.enum) ? schema.properties.event.enum : null;
    if (Object.keys(d).length && !(events && d.eventType === 'promptpack.event')) li.append(block('Request', renderValue(d)));
    if (events) {
      // A PromptPack external state: one button per event it accepts, with a context.
      const context = h('textarea', { name: 'context', placeholder: 'Context for the assistant (optional)' });
      li.append(h('div', { class: 'form' }, h('label', { text: 'Context' }), context,
        h('div', { class: 'actions' }, events.map((ev) => h('button', { type: 'button', class: /reject|declin|den/i.test(ev) ? 'reject' : 'approve', dataset: { event: ev }, text: ev,
          onclick: (e) => send(context.value.trim() ? { event: ev, context: context.value.trim() } : { event: ev }, e.target) })))));
      return;
    }
    if (Object.keys(schema).length) li.append(block('Expected answer (JSON Schema)', renderValue(schema)));
    const text = h('textarea', { name: 'value', class: 'json', spellcheck: 'false' });
    text.value = '{}';
    li.append(h('div', { class: 'form' }, h('label', { text: 'Answer (JSON)' }), text,
      h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', text: 'Send', onclick: (e) => {
        try { send(JSON.parse(text.value), e.target); } catch (err) { showResult(li, 'That is not valid JSON: ' + err.message, false); }
      } }))));
  }

  function showResult(li, text, ok) {
    const r = li.querySelector('.result');
    r.textContent = text;
    r.className = 'result ' + (ok ? 'ok' : 'bad');
  }

  // resolve answers one interrupt. The Idempotency-Key makes a retried click safe: the
  // host applies the answer once.
  async function resolve(it, value, li, result, button) {
    const card = state.cards.get(itemID(it));
    if (card) card.busy = true;
    const buttons = li.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    const idem = (crypto.randomUUID && crypto.randomUUID()) || String(Date.now()) + Math.random();
    let res;
    try {
      res = await call('POST', '/v1/runs/' + encodeURIComponent(it.runId) + '/interrupts/' + encodeURIComponent(it.nodeId),
        { resumeValue: value }, { 'Idempotency-Key': idem });
    } catch (err) {
      res = { status: 0, data: { message: 'the host could not be reached: ' + err.message } };
    }
    if (res.status >= 200 && res.status < 300) {
      li.classList.add('done');
      li.dataset.done = 'true';
      showResult(li, 'Sent. The run is now ' + ((res.data && res.data.status) || 'running') + '.', true);
      return;
    }
    if (card) card.busy = false;
    buttons.forEach((b) => { b.disabled = false; });
    showResult(li, 'Not sent: ' + errorText(res), false);
    if (button) button.focus();
  }

  // ---- wiring ----

  $('signin').addEventListener('submit', async (e) => {
    e.preventDefault();
    const button = $('signin-button');
    button.disabled = true;
    const err = await signIn($('key').value.trim());
    button.disabled = false;
    if (err) { showSignIn(err); return; }
    $('key').value = '';
    showInbox();
  });
  $('signout').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORE);
    state.key = '';
    state.cards.clear();
    $('items').replaceChildren();
    showSignIn('');
  });
  $('with-users').addEventListener('change', (e) => {
    state.withUsers = e.target.checked;
    connect();
  });
  for (const tab of document.querySelectorAll('[data-filter]')) {
    tab.addEventListener('click', () => {
      state.filter = tab.dataset.filter;
      for (const t of document.querySelectorAll('[data-filter]')) t.setAttribute('aria-selected', String(t === tab));
      applyFilter();
    });
  }
  setInterval(() => {
    // Keep "since … ago" current without a new frame.
    for (const it of state.items) {
      const card = state.cards.get(itemID(it));
      const span = card && card.el.querySelector('.meta span[title]');
      if (span) span.textContent = 'since ' + ago(it.requestedAt);
    }
  }, 30000);

  if (state.key) showInbox(); else showSignIn('');
})();
