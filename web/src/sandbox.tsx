// Unsandboxed marks an agent whose processes run outside troupe's sandbox
// (internal/sandbox, C16): its team set sandbox = false, or its engine is
// not sandboxed by default. The same mark as `troupe agents`' SANDBOX
// column and `troupe doctor`'s UNSANDBOXED line.
export function Unsandboxed() {
  return (
    <span class="unsandboxed" title="its processes run outside troupe's sandbox (sandbox = false in its team, or an engine not sandboxed by default): they reach all the person's user can">
      unsandboxed
    </span>
  );
}
