// Placeholder until patterns and fields land: says so rather than failing.
export function mount(main) {
  main.textContent = 'Patterns and fields: not built yet.';
  return { update() {}, unmount() {} };
}
