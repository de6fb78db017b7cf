// Placeholder until the alerts view lands: says so rather than failing.
export function mount(main) {
  main.textContent = 'Alerts: not built yet.';
  return { update() {}, unmount() {} };
}
