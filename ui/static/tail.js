// Live tail over the WebSocket API: lines as the server sends them, pause (lines wait in a
// buffer) and resume, and a notice when the server reports entries it dropped.
import * as api from './api.js';
import { LogList, entriesOf } from './logs.js';
import { needles, withMatcher, withStage } from './logql.js';
import { push } from './state.js';
import { h } from './util.js';

const KEEP = 2000; // lines kept on the page; older ones leave as new ones come

export function mount(main, initial) {
  const query = h('textarea', { id: 'tail-query', rows: 2, spellcheck: false,
    'aria-label': 'LogQL log query to tail', placeholder: '{service_name="app"}   (Ctrl+Enter starts)' });
  const start = h('button', { type: 'submit', id: 'tail-start' }, 'Start');
  const pause = h('button', { type: 'button', id: 'tail-pause', disabled: true }, 'Pause');
  const stop = h('button', { type: 'button', id: 'tail-stop', disabled: true }, 'Stop');
  const status = h('span', { class: 'status', id: 'tail-status', 'aria-live': 'polite' }, 'Not connected.');
  const dropped = h('p', { class: 'notice', id: 'tail-dropped', role: 'status', hidden: true });
  const error = h('pre', { class: 'error', id: 'tail-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'query', id: 'tail-form' }, query,
    h('div', { class: 'controls' }, start, pause, stop, status));
  const lines = h('div', { id: 'tail-lines' });
  main.replaceChildren(form, error, dropped, lines);

  const list = new LogList(lines, (kind, name, value) => {
    query.value = kind === 'stream' ? withMatcher(query.value, name, value)
      : withStage(query.value, `| ${name}=${JSON.stringify(value)}`);
  });
  let ws = null;
  let paused = false;
  let buffer = [];
  let droppedCount = 0;

  function setStatus(text) { status.textContent = text; }

  function show(entries) {
    if (!entries.length) return;
    // follow the newest line unless the reader has scrolled up to read
    const atBottom = lines.scrollHeight - lines.scrollTop - lines.clientHeight < 40;
    list.append(entries, KEEP);
    if (atBottom) lines.scrollTop = lines.scrollHeight;
  }

  function close() {
    if (ws) { ws.onclose = null; ws.close(); ws = null; }
    pause.disabled = stop.disabled = true;
  }

  async function explain(url) {
    try {
      return (await api.tailRefusal(url)) || 'The tail closed before it started (see the server\u2019s log).';
    } catch (e) {
      return `The server cannot be reached: ${e.message}`;
    }
  }

  function open(q) {
    close();
    error.hidden = true;
    dropped.hidden = true;
    droppedCount = 0;
    buffer = [];
    paused = false;
    pause.textContent = 'Pause';
    list.render([], needles(q));
    setStatus('Connecting…');
    // from a minute ago: the last lines give context before the live ones
    const url = api.tailURL(q, Date.now() - 60e3, 100);
    const sock = ws = new WebSocket(url, api.tailProtocols());
    let opened = false;
    sock.onopen = () => {
      opened = true;
      setStatus('Connected: waiting for lines.');
      pause.disabled = stop.disabled = false;
    };
    sock.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      const entries = entriesOf(msg.streams || [], 'forward');
      if (msg.dropped_entries && msg.dropped_entries.length) {
        droppedCount += msg.dropped_entries.length;
        dropped.textContent = `The server dropped ${droppedCount} entr${droppedCount === 1 ? 'y' : 'ies'} ` +
          'it could not send in time: the tail is missing lines.';
        dropped.hidden = false;
      }
      if (paused) {
        buffer.push(...entries);
        setStatus(`Paused: ${buffer.length} new line${buffer.length === 1 ? '' : 's'} waiting.`);
      } else {
        show(entries);
        setStatus(`Connected: ${list.entries.length} line${list.entries.length === 1 ? '' : 's'} received.`);
      }
    };
    sock.onclose = async (ev) => {
      if (ws !== sock) return;
      ws = null;
      pause.disabled = stop.disabled = true;
      setStatus('Disconnected.');
      const reason = ev.reason || (opened ? '' : await explain(url));
      if (reason) {
        error.textContent = reason;
        error.hidden = false;
      }
    };
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    push({ view: 'tail', q: query.value });
    if (query.value.trim()) open(query.value);
  });
  query.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    if (paused) setStatus('Paused: new lines wait here.');
    else {
      show(buffer);
      buffer = [];
      setStatus('Connected.');
    }
  });
  stop.addEventListener('click', () => { close(); setStatus('Stopped.'); });

  let tenant = initial.tenant;
  function begin(s) {
    tenant = s.tenant;
    query.value = s.q;
    if (s.q.trim()) open(s.q);
  }
  begin(initial);
  return {
    update(s) { if (s.q !== query.value || s.tenant !== tenant || !ws) begin(s); },
    unmount: close,
  };
}
