// Plain words for the engine's fallback and abort reasons.

export const FALLBACK_WORDS = {
  system_prompt_changed: "the conversation was replayed because the system prompt changed",
  model_changed: "the conversation was replayed because the model changed",
  provider_changed: "the conversation was replayed because the provider changed",
  toolset_changed: "the conversation was replayed because the enabled tools changed",
  cursor_expired: "the conversation was replayed because the provider no longer had it (the cursor expired)",
  cursor_invalid: "the conversation was replayed because the stored cursor was unusable",
  envelope_malformed: "the conversation was replayed because the stored continuation state was unreadable",
  context_overflow: "the conversation outgrew the model's context window, so it was resent without its oldest turns (they stay in the chat)",
};

export const ABORT_WORDS = {
  cancelled: "the turn was cancelled before it finished",
  stopped: "stopped on request; the text so far is kept",
  provider_failed: "the provider returned an error",
  tool_result_cursor_loss: "the provider lost the conversation while tool results were in flight",
  tool_iteration_limit: "the model kept calling tools past the limit",
  context_overflow: "the message is too long for the model's context window, even without the oldest turns; a shorter one can go on",
  commit_conflict: "the chat changed while the turn ran",
  commit_failed: "the turn could not be saved",
  lease_expired: "the turn ran out of time",
};

/** Why an answer ended, when it is worth saying (TurnCompleted.finish_reason). */
export const FINISH_WORDS = {
  length: "answer cut at the token limit",
  content_filter: "answer stopped by the provider's content filter",
  refusal: "the model declined to answer",
};

/** A provider failure's facts in words: "rate limited, retry in 20 s". */
export function failureWords(failure) {
  const what = failure.errorType === "rate_limited" ? "rate limited"
    : failure.retryable ? "temporary provider error" : "the provider refused the request";
  const status = failure.status ? ` (HTTP ${failure.status}${failure.code ? `, ${failure.code}` : ""})` : "";
  const wait = failure.retryAfter ? `, retry in ${Math.ceil(failure.retryAfter)} s`
    : failure.retryable ? ", retry shortly" : "";
  return `${what}${status}${wait}`;
}

/** An HTTP answer that is no error of the API's own (a proxy's HTML page, a JSON body
 *  with no message) in words: "HTTP 413: the message and its attachments are larger ...". */
export function statusWords(status) {
  const what = status === 413
    ? "the message and its attachments are larger than the server (or a proxy in front of it) takes"
    : status === 429 ? "too many requests; try again shortly"
    : [502, 503, 504].includes(status) ? "the server did not answer (a proxy in front of it said so); try again shortly"
    : status >= 500 ? "the server failed; try again shortly"
    : "the answer was not the server's (a proxy in front of it?)";
  return `HTTP ${status}: ${what}`;
}
