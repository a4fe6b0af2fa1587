// The JSON API (docs/server.md) and the bearer token it needs.

import { $, fragmentParams } from "./dom.js";
import { state } from "./state.js";

export const TOKEN_KEY = "turnstate.token";

export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || body.error || `HTTP ${status}`);
    this.status = status; this.body = body;
  }
}

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
}

export async function api(method, path, body) {
  const init = { method, headers: authHeaders() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) { askForToken(); throw new ApiError(401, { error: "unauthorized" }); }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({ error: "bad_response" }));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export function askForToken() {
  localStorage.removeItem(TOKEN_KEY);
  $("login").hidden = false;
  $("login-token").focus();
}

export function takeToken() {
  const params = fragmentParams();
  const fromUrl = params.get("token");
  if (fromUrl) {
    localStorage.setItem(TOKEN_KEY, fromUrl);
    params.delete("token");
    history.replaceState(null, "", params.toString() ? `#${params}` : location.pathname);
  }
  state.token = localStorage.getItem(TOKEN_KEY);
  return Boolean(state.token);
}

export function wireLogin() {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(TOKEN_KEY, $("login-token").value.trim());
    location.reload();
  });
}
