// Alerts: the ruler's groups with their rules, health, last evaluation and the alerts they
// hold, from the Prometheus-style rules API (compat/api/v1/rules).
import * as api from './api.js';
import { esc, h, labelsText } from './util.js';

const when = (t) => (!t || t.startsWith('0001-')) ? 'never' : new Date(t).toLocaleString();

function alertsHTML(alerts) {
  if (!alerts || !alerts.length) return '';
  return '<ul class="alerts">' + alerts.map((a) => `<li class="${esc(a.state)}">${esc(a.state)} ` +
    `${esc(labelsText(a.labels))} since ${esc(when(a.activeAt))} value ${esc(a.value)}</li>`).join('') + '</ul>';
}

function groupHTML(g) {
  const rows = g.rules.map((r) => `<tr><td>${esc(r.name || r.record || '')}<div class="muted">${esc(r.type)}</div></td>` +
    `<td><code>${esc(r.query)}</code>${alertsHTML(r.alerts)}</td>` +
    `<td class="${r.state === 'firing' ? 'firing' : r.state === 'pending' ? 'pending' : ''}">${esc(r.state || '')}</td>` +
    `<td class="${r.health === 'ok' ? 'health-ok' : 'health-err'}">${esc(r.health)}${r.lastError ? `<div>${esc(r.lastError)}</div>` : ''}</td>` +
    `<td>${esc(when(r.lastEvaluation))}</td></tr>`).join('');
  return `<section class="group"><h3>${esc(g.name)} <span class="muted">${esc(g.file)} · every ${esc(g.interval)}s · ` +
    `evaluated ${esc(when(g.lastEvaluation))}</span></h3><table class="grid"><thead><tr><th>Rule</th><th>Query</th>` +
    `<th>State</th><th>Health</th><th>Last evaluation</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

export function mount(main) {
  const refresh = h('button', { type: 'button', id: 'alerts-refresh' }, 'Refresh');
  const summary = h('p', { id: 'alerts-summary', class: 'status', 'aria-live': 'polite' });
  const error = h('pre', { class: 'error', role: 'alert', hidden: true });
  const groups = h('div', { id: 'alert-groups' });
  main.replaceChildren(h('div', { class: 'controls' }, refresh, summary), error, groups);

  async function load() {
    error.hidden = true;
    try {
      const res = await api.api('compat/api/v1/rules');
      const gs = res.data.groups || [];
      const rules = gs.flatMap((g) => g.rules);
      const firing = rules.flatMap((r) => r.alerts || []).filter((a) => a.state === 'firing').length;
      summary.textContent = `${gs.length} group${gs.length === 1 ? '' : 's'}, ${rules.length} rule${rules.length === 1 ? '' : 's'}, ` +
        `${firing} firing alert${firing === 1 ? '' : 's'}`;
      groups.innerHTML = gs.length ? gs.map(groupHTML).join('')
        : '<p class="muted">No rule groups: the ruler has none for this tenant.</p>';
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
    }
  }
  refresh.addEventListener('click', load);
  load();
  return { update() { load(); }, unmount() {} };
}
