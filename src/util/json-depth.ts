/**
 * How deep JSON nests. JSON.parse takes any depth, but JSON.stringify and every recursive walk
 * (canonical JSON, redaction) overflow the stack somewhere past a few thousand levels, and a body
 * of 16 KiB can nest 8,000 deep. So what comes from outside is measured before anything walks it.
 */

/** Whether a parsed value nests arrays or objects deeper than `max`, walked without recursion. */
export function depthExceeds(value: unknown, max: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const top = stack.pop() as { value: unknown; depth: number };
    if (top.value === null || typeof top.value !== 'object') continue;
    if (top.depth > max) return true;
    for (const child of Object.values(top.value)) {
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: top.depth + 1 });
    }
  }
  return false;
}

/**
 * Whether JSON text (well-formed: it parsed) nests arrays or objects deeper than `max`, read as
 * text without building anything. Text shorter than twice `max` cannot, and is not read.
 */
export function textDepthExceeds(text: string, max: number): boolean {
  if (text.length <= 2 * max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
