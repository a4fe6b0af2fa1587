// The page's mutable state, one object every module shares.

export const state = { token: null, config: null, chatId: null, next: null, query: "", controller: null, busy: false, older: null, cost: 0, costUnknown: 0 };
