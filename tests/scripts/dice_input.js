const modifier = (text) => {
  if (handleCommand(text) !== null) {
    return { text, stop: true };
  }
  state.turns = (state.turns || 0) + 1;
  return { text };
};

modifier(text);
