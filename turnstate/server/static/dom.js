// DOM helpers shared by every module: element lookup and construction, number format.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

export function fmt(n) { return Number(n || 0).toLocaleString("en-US"); }

export function fragmentParams() { return new URLSearchParams(location.hash.slice(1)); }

/** How many characters ``text`` has as the server counts them: code points (an emoji is
 *  one, where ``length`` counts its two UTF-16 code units). */
export function chars(text) {
  let count = 0;
  for (const _ of text) count += 1;  // a string iterates by code point
  return count;
}

/** ``text``'s first ``limit`` code points (``slice`` could cut an emoji in half). */
export const cutChars = (text, limit) => Array.from(text).slice(0, limit).join("");
