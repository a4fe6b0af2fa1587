// The top bar's context meter and stored-cursor label.

import { $, fmt } from "./dom.js";

export function renderMeter(context) {
  const meter = $("meter");
  if (!context) {
    meter.dataset.severity = "none";
    $("meter-fill").style.width = "0";
    $("meter-label").textContent = "context: no turn yet";
    return;
  }
  const ratio = context.estimatedUsageRatio;
  meter.dataset.severity = context.severity;
  meter.dataset.ratio = ratio.toFixed(4);
  $("meter-fill").style.width = `${Math.min(100, ratio * 100).toFixed(1)}%`;
  $("meter-label").textContent = `context ${Math.round(ratio * 100)}% · ` +
    `${fmt(context.estimatedInputTokens)} / ${fmt(context.contextLimit)} tokens · ` +
    `${context.severity} · ${context.source === "provider" ? "reported by provider" : "estimated"}`;
}

export function renderContinuation(cont) {
  const node = $("continuation");
  if (!cont) { node.textContent = "no stored cursor"; return; }
  if (cont.malformed) { node.textContent = "stored state unreadable"; return; }
  const age = cont.ageSeconds === null ? "" : ` · ${cont.ageSeconds}s old`;
  node.textContent = `cursor: ${cont.provider} ${cont.mode} ${cont.model}${age}`;
}
