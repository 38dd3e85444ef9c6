// @ts-check
// Tabs (WAI-ARIA tabs pattern: arrow keys move between tabs, the URL hash remembers the tab).
import { emit } from "./state.js";

/** @returns {HTMLElement[]} */
function allTabs() {
  return [...document.querySelectorAll('[role="tab"]')].map((tab) => /** @type {HTMLElement} */ (tab));
}

/**
 * @param {HTMLElement} tab
 * @param {{ focus?: boolean, updateHash?: boolean }} [options]
 */
export function selectTab(tab, { focus = false, updateHash = true } = {}) {
  for (const other of allTabs()) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    other.tabIndex = selected ? 0 : -1;
    const panel = document.getElementById(other.getAttribute("aria-controls") ?? "");
    if (panel) panel.hidden = !selected;
  }
  if (focus) tab.focus();
  const name = tab.id.replace(/^tab-/, "");
  if (updateHash && window.location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  emit("tab", name);
}

/** @param {string} name */
export function showTab(name) {
  const tab = document.getElementById(`tab-${name}`);
  if (tab) selectTab(tab);
}

function tabFromHash() {
  const name = window.location.hash.slice(1);
  return allTabs().find((tab) => tab.id === `tab-${name}`) ?? null;
}

export function mountTabs() {
  const tabs = allTabs();
  for (const tab of tabs) {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (event) => {
      const index = tabs.indexOf(tab);
      let next = null;
      if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
      else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
      else if (event.key === "Home") next = tabs[0];
      else if (event.key === "End") next = tabs[tabs.length - 1];
      if (!next) return;
      event.preventDefault();
      selectTab(next, { focus: true });
    });
  }
  window.addEventListener("hashchange", () => {
    const tab = tabFromHash();
    if (tab) selectTab(tab, { updateHash: false });
  });
  const initial = tabFromHash();
  if (initial) selectTab(initial, { updateHash: false });
}
