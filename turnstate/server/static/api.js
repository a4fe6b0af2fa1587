// The JSON API (docs/server.md) and the bearer token it needs: taking a token from a
// link (asking first when it would switch the signed-in owner), and the login form.

import { $, fragmentParams } from "./dom.js";
import { state } from "./state.js";

export const TOKEN_KEY = "turnstate.token";

export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || body.error || `HTTP ${status}`);
    this.status = status; this.body = body;
  }
}

const UNREACHABLE = "the server cannot be reached: check that it is running and that you are online, then try again";

/** Whether ``error`` is a request that got no answer at all (worth trying again). */
export const unanswered = (error) => !(error instanceof ApiError) || error.status === 0;

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
}

/** ``headers``: more request headers (an edit's and a delete's ``If-Match``). */
export async function api(method, path, body, headers = {}) {
  const init = { method, headers: authHeaders(headers) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {  // no answer at all: the browser says only "Failed to fetch"
    throw new ApiError(0, { error: "unreachable", message: UNREACHABLE });
  }
  if (response.status === 401) { askForToken(); throw new ApiError(401, { error: "unauthorized" }); }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({ error: "bad_response", message:
    `HTTP ${response.status}: the answer was not the server's JSON (a proxy in front of it?); try again shortly` }));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export function askForToken(message = "") {
  localStorage.removeItem(TOKEN_KEY);
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("login-error").hidden = !message;
  $("login-token").focus();
}

/** The owner a token signs in as, or null when the server refuses it. */
async function ownerOf(token) {
  const response = await fetch("/api/config", { headers: { Authorization: `Bearer ${token}` } });
  if (!response.ok) return null;
  return (await response.json()).owner;
}

function dropTokenFromUrl() {
  const params = fragmentParams();
  params.delete("token");
  history.replaceState(null, "", params.toString() ? `#${params}` : location.pathname);
}

/** At load: a ``#token=`` link signs in; over another owner's stored token only once
 * the user agreed to switch. Returns whether a token is at hand. */
export async function takeToken() {
  const fromUrl = fragmentParams().get("token");
  const stored = localStorage.getItem(TOKEN_KEY);
  if (fromUrl) {
    dropTokenFromUrl();
    if (!stored || stored === fromUrl) localStorage.setItem(TOKEN_KEY, fromUrl);
    else {
      const [was, now] = await Promise.all([ownerOf(stored), ownerOf(fromUrl)]);
      const switching = now !== null && was !== now;
      if (now !== null && (!switching || was === null || window.confirm(
        `This link signs you in as "${now}" instead of "${was}". Switch accounts?`))) {
        localStorage.setItem(TOKEN_KEY, fromUrl);
      }
    }
  }
  state.token = localStorage.getItem(TOKEN_KEY);
  return Boolean(state.token);
}

/** Mid-session a link never switches the owner: its token is dropped from the URL. */
export function ignoreTokenInUrl() {
  if (!fragmentParams().get("token")) return false;
  dropTokenFromUrl();
  return true;
}

export function wireLogin() {
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("login-token").value.trim();
    if (await ownerOf(token) === null) {
      $("login-error").textContent = "The server does not know this token.";
      $("login-error").hidden = false;
      $("login-token").select();
      return;
    }
    localStorage.setItem(TOKEN_KEY, token);
    location.reload();
  });
}
