// The URL names the project, the view and its argument (an agent, a task):
// #/p/PROJECT/VIEW/ARG. Views register themselves in `views` (views/*.tsx,
// imported by main.tsx in tab order).
import type { ComponentType } from "preact";

export interface Route { project: string; view: string; arg: string }

export interface View {
  id: string;
  label: string;
  component: ComponentType<{ arg: string }>;
  /** inNav: shown as a tab (an agent view is reached from the team list). */
  inNav: boolean;
}

export const views: View[] = [];
export function registerView(v: View) { views.push(v); }
export function findView(id: string) { return views.find((v) => v.id === id) || views[0]; }

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").map((s) => { try { return decodeURIComponent(s); } catch { return ""; } });
  if (parts[0] !== "p") return { project: "", view: "conversation", arg: "" };
  return { project: parts[1] || "", view: parts[2] || "conversation", arg: parts.slice(3).join("/") };
}

export function routeHash(r: Route): string {
  let h = `#/p/${encodeURIComponent(r.project)}/${encodeURIComponent(r.view)}`;
  if (r.arg) h += "/" + encodeURIComponent(r.arg);
  return h;
}
