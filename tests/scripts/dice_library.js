// A command script in the shape published AI Dungeon scripts take: the library holds the
// logic, the input hook consumes "/roll NdS" commands and reports through state.message.
const Dice = {
  roll(count, sides) {
    // Deterministic for tests: every die shows its highest face.
    return Array.from({ length: count }, () => sides);
  },
};

function handleCommand(text) {
  const match = text.match(/\/roll\s+(\d*)d(\d+)/i);
  if (!match) return null;
  const rolls = Dice.roll(Number(match[1] || 1), Number(match[2]));
  const total = rolls.reduce((a, b) => a + b, 0);
  state.rolls = (state.rolls ?? []).concat([total]);
  state.message = `🎲 ${match[0].slice(1)}: ${rolls.join(" + ")} = ${total}`;
  log(`rolled ${total}`);
  return total;
}
