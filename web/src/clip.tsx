// Clip shows a long text's first lines with a "show all" button.
import { useState } from "preact/hooks";
import { visible } from "./format";

const limit = 2000;

export function Clip({ text: raw, cut }: { text: string; cut?: boolean }) {
  const [all, setAll] = useState(false);
  const text = visible(raw);
  const long = text.length > limit;
  return (
    <div class="clip">
      <pre>{all || !long ? text : text.slice(0, limit) + "…"}</pre>
      {long && (
        <button type="button" class="link show-all" onClick={() => setAll(!all)}>
          {all ? "show less" : `show all (${text.length} characters)`}
        </button>
      )}
      {cut && <p class="note">the feed cut this text; the agent log has it whole</p>}
    </div>
  );
}
