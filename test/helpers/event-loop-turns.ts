/** Counts the event loop's turns from now until `stop()`: did work let the loop run meanwhile? */
export function countTurns(): { stop(): number } {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    turns++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop: () => {
      counting = false;
      return turns;
    },
  };
}
