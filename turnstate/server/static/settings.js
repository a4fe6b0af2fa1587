// The settings panel: provider, model, system prompt, tools, compaction, max output tokens
// and reasoning effort (kept in localStorage).

import { $, el, fmt } from "./dom.js";
import { state } from "./state.js";

const SETTINGS_KEY = "turnstate.settings";

export function settings() {
  return {
    provider: $("provider").value,
    model: $("model").value,
    system_prompt: $("system-prompt").value,
    tools: [...document.querySelectorAll("#tools input:checked")].map((box) => box.value),
    compaction: $("compaction").checked,
    settings: generation(),
  };
}

/** The per-turn generation settings the panel sets (empty fields keep the model's default). */
function generation() {
  const out = {};
  const tokens = parseInt(boundedTokens($("max-tokens").value, pickedModel()), 10);
  if (tokens > 0) out.max_output_tokens = tokens;
  if ($("reasoning-effort").value) out.reasoning_effort = $("reasoning-effort").value;
  return out;
}

/** The picked model as /api/config describes it (its settings' bounds included; none
 *  known for a provider listed without models). */
function pickedModel() {
  const provider = state.config.providers.find((p) => p.name === $("provider").value);
  const models = provider ? provider.models : [];
  return models.find((m) => m.name === $("model").value) || models[0] || {};
}

/** ``text`` as a max-output-tokens value the server takes for ``model``: moved into its
 *  range (OpenAI Responses takes 16 at least), or "" (the model's default). */
function boundedTokens(text, model) {
  const tokens = parseInt(text, 10);
  if (!(tokens > 0) || model.maxOutputTokens == null) return "";
  return String(Math.min(Math.max(tokens, model.minOutputTokens), model.maxOutputTokens));
}

/** Fit the max-tokens field and the effort menu to the picked model, as the server
 *  checks a turn's settings: the field's range is the model's, the menu offers only the
 *  efforts the model takes (``none`` on gpt-5.1); a kept effort it does not take goes
 *  back to the model's default. */
function fitGeneration(effort = $("reasoning-effort").value) {
  const model = pickedModel();
  const field = $("max-tokens");
  const takesTokens = model.maxOutputTokens != null;
  field.disabled = !takesTokens;
  field.min = takesTokens ? model.minOutputTokens : 1;
  if (takesTokens) field.max = model.maxOutputTokens; else field.removeAttribute("max");
  field.placeholder = takesTokens
    ? `model default (${fmt(model.minOutputTokens)}–${fmt(model.maxOutputTokens)})`
    : "model default";
  field.value = boundedTokens(field.value, model);
  const menu = $("reasoning-effort");
  const efforts = model.reasoningEfforts || [];
  menu.replaceChildren(el("option", { value: "" }, "model default"),
    ...efforts.map((name) => el("option", { value: name }, name)));
  menu.value = efforts.includes(effort) ? effort : "";
  menu.disabled = !efforts.length;
}

function saveSettings() {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings()));
  const s = settings();
  const tools = s.tools.length ? ` · tools: ${s.tools.join(", ")}` : "";
  $("settings-summary").textContent = `${s.provider} / ${s.model}${tools}`;
}

function fillModels(selected) {
  const provider = state.config.providers.find((p) => p.name === $("provider").value);
  $("model").replaceChildren(...provider.models.map((m) =>
    el("option", { value: m.name }, `${m.name} (${fmt(m.contextLimit)} tokens)`)));
  if (selected && provider.models.some((m) => m.name === selected)) $("model").value = selected;
}

export function setupPickers() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}"); } catch { saved = {}; }
  const { providers, tools } = state.config;
  $("provider").replaceChildren(...providers.map((p) =>
    el("option", { value: p.name }, p.durable ? `${p.name} (durable cursor)` : p.name)));
  if (providers.some((p) => p.name === saved.provider)) $("provider").value = saved.provider;
  fillModels(saved.model);
  $("system-prompt").value = saved.system_prompt || "";
  $("compaction").checked = saved.compaction !== false;
  const kept = saved.settings || {};
  $("max-tokens").value = kept.max_output_tokens || "";
  fitGeneration(kept.reasoning_effort || "");
  $("tools").replaceChildren(...tools.map((t) => el("label", { class: "check", title: t.description },
    el("input", { type: "checkbox", value: t.name, checked: (saved.tools || []).includes(t.name) }),
    ` ${t.name}`)));
  $("emulator-controls").hidden = !state.config.emulated;
  for (const id of ["provider", "model", "system-prompt", "compaction", "max-tokens", "reasoning-effort"]) {
    $(id).addEventListener("change", () => {
      if (id === "provider") fillModels();
      if (["provider", "model", "max-tokens"].includes(id)) fitGeneration();
      saveSettings();
    });
  }
  $("tools").addEventListener("change", saveSettings);
  saveSettings();
}
