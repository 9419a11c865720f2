// An output hook that learns names: each capitalised "the Name" in the narration gets a story
// card (once), and the card of a name it has seen before is updated with the latest sentence.
const modifier = (text) => {
  const names = [...text.matchAll(/\bthe ([A-Z][a-z]+)\b/g)].map((m) => m[1]);
  for (const name of new Set(names)) {
    const sentence = text.split(/(?<=[.!?])\s+/).find((s) => s.includes(name)) ?? text;
    const index = storyCards.findIndex((card) => card.keys === name);
    if (index === -1) {
      addStoryCard(name, sentence.trim(), "location", name, "learned by lore_output.js");
    } else {
      updateStoryCard(index, name, sentence.trim());
    }
  }
  state.learned = storyCards.filter((c) => c.description === "learned by lore_output.js").length;
  return { text };
};
modifier(text);
