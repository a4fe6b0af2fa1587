// The emulator controls (shown only when the server runs the emulators).

import { api } from "./api.js";
import { $ } from "./dom.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

async function emulatorControl(path, body, done) {
  try {
    await api("POST", path, body);
    toast("Emulator", done, "ok");
  } catch (error) { toast("Emulator", error.message, "error"); }
}

export function wireEmulator() {
  $("expire-cursor").addEventListener("click", () => {
    if (!state.chatId) {
      toast("Emulator", "Open a chat first: the cursor to expire is the open chat's.", "error");
      return;
    }
    emulatorControl("/api/emulator/expire-cursor", { chat_id: state.chatId },
      "The provider forgot this chat's cursor.");
  });
  $("fail-next").addEventListener("click", () => emulatorControl(
    "/api/emulator/faults", { provider: $("provider").value, kind: "error" },
    `The next ${$("provider").value} request will fail.`));
}
