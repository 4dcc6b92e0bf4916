// RunsOn says where an agent runs when it is not this machine: the runner
// it is on (`troupe agents`' RUNNER column), or the labels it waits for a
// runner with. Nothing for a local agent.
import type { Agent } from "./api";

export function runsOn(ag: Agent): string {
  if (ag.runner) return `on ${ag.runner}`;
  if (ag.runner_labels?.length) return `no runner yet (labels ${ag.runner_labels.join(", ")})`;
  return "";
}

export function RunsOn({ ag }: { ag: Agent }) {
  const s = runsOn(ag);
  return s ? <span class="runs-on note" data-runner={ag.runner || ""} title="the machine it runs on (a runner: troupe runners)">{s}</span> : null;
}
