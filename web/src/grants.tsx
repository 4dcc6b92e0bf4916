// The grants of agents and checks, as the person approves them: in a held
// team change (Needs you) and before adding a project (Team).
import { Clip } from "./clip";
import type { AgentGrants, CheckGrants, Grant } from "./api";

function GrantList({ grants }: { grants: Grant[] }) {
  return <ul>{grants.map((x) => <li key={x.field}><code>{x.field}</code><Clip text={x.old ? `${x.old} → ${x.new || "(removed)"}` : x.new} /></li>)}</ul>;
}

export function AgentGrantsList({ agents }: { agents: AgentGrants[] }) {
  return (
    <>
      {agents.map((g) => (
        <div key={g.agent} class="team-agent" data-grant-agent={g.agent}>
          <strong>{g.agent}</strong>{g.engine ? ` (${g.engine})` : ""}{g.new ? " (new agent)" : ""}
          <GrantList grants={g.grants} />
        </div>
      ))}
    </>
  );
}

export function CheckGrantsList({ checks }: { checks: CheckGrants[] }) {
  return (
    <>
      {checks.map((g) => (
        <div key={"check " + g.check} class="team-agent team-check" data-held-check={g.check}>
          check <strong>{g.check}</strong>{g.new ? " (new check: it runs a command)" : " (keeps its approved definition meanwhile)"}
          <GrantList grants={g.grants} />
        </div>
      ))}
    </>
  );
}
