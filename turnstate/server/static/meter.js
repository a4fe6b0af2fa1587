// The top bar's context meter and stored-cursor label.

import { $, fmt } from "./dom.js";

/** The whole percent shown for ``ratio``: rounded down, so the number never crosses into
 * a band the severity has not reached (the bands are strict: 0.70 is "info", 0.695
 * shows 69% "normal", 0.965 shows 96% "danger"). */
export function shownPercent(ratio) {
  return Math.floor(ratio * 100 + 1e-9);
}

export function meterLabel(context) {
  const source = context.source === "provider" ? "reported by provider" : "estimated";
  return `context ${shownPercent(context.estimatedUsageRatio)}% · ` +
    `${fmt(context.estimatedInputTokens)} / ${fmt(context.contextLimit)} tokens · ` +
    `${context.severity} · ${source}`;
}

export function renderMeter(context) {
  const meter = $("meter");
  if (!context) {
    meter.dataset.severity = "none";
    delete meter.dataset.ratio;
    $("meter-fill").style.width = "0";
    $("meter-label").textContent = "context: no turn yet";
    return;
  }
  const ratio = context.estimatedUsageRatio;
  meter.dataset.severity = context.severity;
  meter.dataset.ratio = ratio.toFixed(4);
  $("meter-fill").style.width = `${Math.min(100, ratio * 100).toFixed(1)}%`;
  $("meter-label").textContent = meterLabel(context);
}

export function renderContinuation(cont) {
  const node = $("continuation");
  if (!cont) { node.textContent = "no stored cursor"; return; }
  if (cont.malformed) { node.textContent = "stored state unreadable"; return; }
  const age = cont.ageSeconds === null ? "" : ` · ${cont.ageSeconds}s old`;
  node.textContent = `cursor: ${cont.provider} ${cont.mode} ${cont.model}${age}`;
}
