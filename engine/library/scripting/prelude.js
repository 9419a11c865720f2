// Campfire's scripting prelude: evaluated in a fresh QuickJS context before every hook run.
//
// It reads the hook's input (one JSON text, `__campfire_input`), sets up the globals AI Dungeon
// scripts expect (text, state, history, storyCards and its aliases, info, memory, log, console
// and the story-card functions). The engine then evaluates the scenario's library and hook as
// one sloppy-mode script. Nothing here can reach Python, the file system or the network: data
// crosses as JSON both ways.
//
// The prelude's completion value is its `control` function, which the engine keeps as a handle
// and calls after the script: `control("finish", result)` turns the script's completion value
// and what it left behind into one JSON text. No global leads to it, so a script cannot
// redefine it; and it works with the builtins as they were before the script ran (captured
// below), so a script that replaces JSON.stringify, Array.prototype.push or String, or pollutes
// Object.prototype.toJSON, cannot forge the envelope. What the script put into its own values
// (getters, Proxies, toJSON on state) runs under the time limit, and whatever comes out is
// checked again by the engine (engine/library/scripting/results.py) before anything is kept.
//
// Globals are plain assignments to globalThis (configurable properties), never declarations:
// a script may then declare its own `let text` or `function log` without a redeclaration error.
(function () {
  "use strict";
  var G = globalThis;
  // The builtins the envelope is made with, as they are before any script runs.
  var stringify = JSON.stringify;
  var parse = JSON.parse;
  var toText = String;
  var isArray = Array.isArray;
  var defineProperty = Object.defineProperty;
  var apply = Reflect.apply;
  var NewSet = Set;
  var setHas = Set.prototype.has;
  var setAdd = Set.prototype.add;
  var NewMap = Map;
  var mapGet = Map.prototype.get;
  var mapSet = Map.prototype.set;
  var ErrorType = Error;
  var evaluate = eval;
  var input = parse(G.__campfire_input);
  delete G.__campfire_input;

  // Appends without Array.prototype.push or [[Set]], which a script may have replaced or
  // trapped with a setter on Array.prototype.
  function append(list, value) {
    defineProperty(list, list.length, {
      __proto__: null,
      value: value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  // JSON of a list of strings, without Array.prototype.toJSON (a script may define one).
  function linesJson(lines) {
    var out = "";
    for (var i = 0; i < lines.length; i++) out += (i ? "," : "") + stringify(toText(lines[i]));
    return "[" + out + "]";
  }

  // --- polyfills for builtins real scripts use, where the engine lacks them ---
  function define(target, name, value) {
    if (typeof target[name] === "undefined") {
      Object.defineProperty(target, name, { value: value, writable: true, configurable: true });
    }
  }
  define(Array.prototype, "at", function (index) {
    var n = Math.trunc(index) || 0;
    if (n < 0) n += this.length;
    return n < 0 || n >= this.length ? undefined : this[n];
  });
  define(String.prototype, "at", function (index) {
    var n = Math.trunc(index) || 0;
    if (n < 0) n += this.length;
    return n < 0 || n >= this.length ? undefined : this.charAt(n);
  });
  define(Array.prototype, "findLast", function (predicate, thisArg) {
    for (var i = this.length - 1; i >= 0; i--) {
      if (predicate.call(thisArg, this[i], i, this)) return this[i];
    }
    return undefined;
  });
  define(Array.prototype, "findLastIndex", function (predicate, thisArg) {
    for (var i = this.length - 1; i >= 0; i--) {
      if (predicate.call(thisArg, this[i], i, this)) return i;
    }
    return -1;
  });
  define(Object, "hasOwn", function (object, key) {
    return Object.prototype.hasOwnProperty.call(object, key);
  });
  define(G, "structuredClone", function (value) {
    // Data only, as scripts use it (state, cards): functions and cycles are not clonable.
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  });

  // --- logs ---
  var MAX_LOGS = 200;
  var MAX_LOG_CHARS = 2000;
  var logs = [];
  function show(value) {
    if (typeof value === "string") return value;
    if (value instanceof ErrorType) return toText(value);
    if (value === undefined || typeof value === "function" || typeof value === "symbol") {
      return toText(value);
    }
    try {
      var json = stringify(value);
      return json === undefined ? toText(value) : toText(json);
    } catch (error) {
      return toText(value);
    }
  }
  function log() {
    if (logs.length >= MAX_LOGS) return;
    var line = "";
    for (var i = 0; i < arguments.length; i++) line += (i ? " " : "") + show(arguments[i]);
    append(logs, line.length > MAX_LOG_CHARS ? line.slice(0, MAX_LOG_CHARS) + "…" : line);
  }
  G.log = log;
  G.console = { log: log, info: log, warn: log, error: log, debug: log, trace: log };

  // --- the globals ---
  G.text = input.text;
  G.stop = false;
  var state = input.state && typeof input.state === "object" ? input.state : {};
  if (!state.memory || typeof state.memory !== "object") state.memory = {};
  G.state = state;
  G.history = input.history;
  G.memory = input.memory;
  G.info = input.info;
  var cards = input.storyCards;
  // Each card object as it was handed over, with its id then: the engine follows a card by its
  // object, so a script that changes a card's id (as MagicCards does) changes that card.
  var origins = new NewMap();
  for (var c = 0; c < cards.length; c++) apply(mapSet, origins, [cards[c], toText(cards[c].id)]);
  G.storyCards = cards;
  G.worldInfo = cards;
  G.worldEntries = cards;

  // --- story cards ---
  var newIds = 0;
  function nextId() {
    newIds += 1;
    return "new-" + newIds;
  }
  function keysText(keys) {
    if (isArray(keys)) {
      var out = "";
      // As keys.map(String).join(","): a hole is empty, null is "null".
      for (var i = 0; i < keys.length; i++) {
        out += (i ? "," : "") + (i in keys ? toText(keys[i]) : "");
      }
      return out;
    }
    return keys === undefined || keys === null ? "" : toText(keys);
  }
  function str(value, fallback) {
    return value === undefined || value === null ? fallback : toText(value);
  }
  function current() {
    // The array the script works on, even if it replaced the global.
    var list = G.storyCards;
    return isArray(list) ? list : cards;
  }
  function checkIndex(list, index, what) {
    var n = Number(index);
    if (!Number.isInteger(n) || n < 0 || n >= list.length || !list[n]) {
      throw new Error(what + ": there is no story card at index " + String(index) + ".");
    }
    return n;
  }
  function addStoryCard(keys, entry, type, title, description, options) {
    var list = current();
    var k = keysText(keys);
    for (var i = 0; i < list.length; i++) {
      if (list[i] && keysText(list[i].keys) === k) return false;
    }
    var card = {
      id: nextId(),
      keys: k,
      entry: str(entry, ""),
      type: str(type, "class"),
      // Upstream titles a new card with its keys unless told otherwise; scripts (Auto-Cards)
      // find the card they just added by that title.
      title: str(title, k),
      description: str(description, ""),
    };
    append(list, card);
    return options && options.returnCard ? card : list.length;
  }
  function updateStoryCard(index, keys, entry, type, title, description) {
    var list = current();
    var card = list[checkIndex(list, index, "updateStoryCard")];
    if (keys !== undefined) card.keys = keysText(keys);
    if (entry !== undefined) card.entry = str(entry, "");
    if (type !== undefined) card.type = str(type, "class");
    if (title !== undefined) card.title = str(title, "");
    if (description !== undefined) card.description = str(description, "");
    return card;
  }
  function removeStoryCard(index) {
    var list = current();
    list.splice(checkIndex(list, index, "removeStoryCard"), 1);
  }
  G.addStoryCard = addStoryCard;
  G.updateStoryCard = updateStoryCard;
  G.removeStoryCard = removeStoryCard;
  G.addWorldEntry = addStoryCard;
  G.updateWorldEntry = updateStoryCard;
  G.removeWorldEntry = removeStoryCard;

  // --- reading back what the script left ---
  function cardsJson() {
    // The array as the script left it: a card pushed twice is kept once, a card without an id
    // gets one, and a second object claiming a card's id is a new card.
    var list = current();
    var seen = new NewSet();
    var ids = new NewSet();
    var out = "";
    var count = 0;
    for (var i = 0; i < list.length; i++) {
      var card = list[i];
      if (!card || typeof card !== "object" || apply(setHas, seen, [card])) continue;
      apply(setAdd, seen, [card]);
      var id = card.id === undefined || card.id === null || card.id === "" ? "" : toText(card.id);
      if (!id || apply(setHas, ids, [id])) {
        id = nextId();
        card.id = id;
      }
      apply(setAdd, ids, [id]);
      var origin = apply(mapGet, origins, [card]);
      var fields = {
        __proto__: null,
        id: id,
        keys: keysText(card.keys),
        entry: str(card.entry, ""),
        type: str(card.type, "class"),
        title: str(card.title, ""),
        description: str(card.description, ""),
        origin: origin === undefined ? "" : origin,
      };
      out += (count ? "," : "") + stringify(fields);
      count += 1;
    }
    return "[" + out + "]";
  }
  function readResult(result) {
    var text, stop;
    if (result !== null && typeof result === "object" && ("text" in result || "stop" in result)) {
      text = result.text;
      stop = result.stop;
    } else if (typeof result === "string") {
      text = result;
      stop = false;
    } else {
      text = G.text;
      stop = G.stop;
    }
    text = text === undefined || text === null ? "" : toText(text);
    return { __proto__: null, text: text, stop: !!stop || text === "stop" };
  }
  // A hook tab whose completion value is nothing leaves its work to a `modifier` function,
  // which is then called with the text. AI Dungeon's documentation only says a hook tab's last
  // line "must always be modifier(text)" (help.aidungeon.com/scripting), but published scripts
  // that work there end their tabs in `void 0` after defining `modifier` without calling it:
  // the "Custom Continue" example of Magic's Scripting Guidebook (magicoflolis/aidungeon.js,
  // "Scripting Guidebook.md": `const modifier = () => {...}` then `void 0`), and MagicCards
  // (magicoflolis/MagicCards, dist/Library.js assigns a frozen `globalThis.modifier`, "ALWAYS
  // the last function executed", and dist/Input.js ends in `void 0`). So: a completion value
  // of undefined (or null: the two cannot be told apart once the value has crossed to Python)
  // with a `modifier` function in scope, declared (`const modifier`) or a global property,
  // means `modifier(text)`; what it returns is read as any result is, its globals otherwise.
  function modifierResult(result) {
    if (result !== undefined && result !== null) return result;
    var modifier = evaluate("typeof modifier === 'function' ? modifier : undefined");
    if (typeof modifier !== "function") return result;
    // The script's `text` as it left it (a tab may rewrite it before `void 0`).
    return modifier(evaluate("text"));
  }
  function finish(result) {
    var out = readResult(modifierResult(result));
    var left = G.state;
    if (left === null || typeof left !== "object") left = {};
    // Each part is JSON text of its own inside a flat envelope of strings: nothing in the
    // envelope has a prototype or a toJSON a script could have touched.
    var state = stringify(left);
    return stringify({
      __proto__: null,
      text: out.text,
      stop: out.stop,
      state: state === undefined ? "null" : toText(state),
      storyCards: cardsJson(),
      logs: linesJson(logs),
    });
  }
  // The engine's handle: "finish" with the script's completion value, "evaluate" with its
  // source (for a completion value that cannot cross to Python: run from a JavaScript string,
  // it never leaves JavaScript), "logs" after a failed run.
  return function control(command, value) {
    if (command === "finish") return finish(value);
    if (command === "evaluate") return finish(evaluate(value));
    return stringify(linesJson(logs));
  };
})();
