"""Who may do what, and where: the one place Campfire decides rights.

A front end builds an ``Actor`` from whatever it knows about the person (their Discord
permissions in the channel, their roles) and hands it to the engine; every rule below reads
only that and the adventure or server rows. Nothing else in the engine or the front end decides
a right: a cog never asks "is this a manager?" itself.

The rules, in words:

- **Steering** (author's note, plot essentials, AI instructions, cards, settings, memories, the
  summary, world-state corrections): the adventure's host, and members who manage the server.
- **Rewriting a turn** (retry, undo, edit, choose a take): the player whose action it answers,
  the host, and members who manage the server or its messages. The host may make it the host
  and those members alone, or anyone in the adventure's place (``/host rights``).
- **The story's shape** (branches, save points): the host, and members who manage the server
  or its messages.
- **The story's narrative state** (``/narrative correct``, ``/narrative track``): the host
  alone (in a DM its player), since the host's correction outranks Canon and the narration;
  anyone there reads it (``/narrative state``).
- **Host controls** (``/host``: lock, mute, kick, transfer, rights) in a server adventure: the
  host, and members who manage the server or its messages; anyone may read them. They never
  bind those who hold them: while an adventure is locked, only they act (play, retry, rewrite
  turns); a muted or kicked player does neither. A host passes the adventure only to a member
  of its place who has used Campfire, never to a bot.
- **Turn modes and rounds** (``/host mode``, ``engine.story.rounds``): the mode is a host control.
  Anyone who may act submits to a round; only the host and those members close one by hand
  (the Close button); the round's own rules (all acted, the timeout) close it for everyone.
- **Scripts** are code that runs every turn: members who manage the server. The same right
  brings scripts in with a new adventure (an import, or a player's own scenario started in a
  server; the server's library and shipped scenarios were vetted when they came in), and reads
  their code (an export carries it only for them). A scenario's code is read by those who
  may import and delete in its library (a player's own: that player; shipped: anyone).
- **Starting or importing where an adventure runs** ends it: its host, and members who manage
  the server or its messages. The same right ends an adventure on purpose (``/adventure end``)
  and brings an ended one back where it ran (``/adventure resume``), ending the one running
  there, if any, by the same rule.
- **A button** acts only on the adventure it was drawn for, in the place it is pressed; a Retry
  button only on a request of that adventure that failed, was refused or was interrupted, once.
- **Importing and deleting scenarios**: members who manage the server, and the server's
  importer role. The same people change a server library's scenario (``/card import
  scenario:``); a player's own scenario, that player; a shipped one, no one. A suggested
  action pressed plays as ``/do``.
- **A server's settings** (``/server``, ``engine.people.servers``: the importer role, suggested
  actions): members who manage the server, never in a DM.
- **Chapters** (``/chapters``, ``engine.story.chapters``): anyone in a server adventure's place
  reads
  its chapters and recaps, as they read the story; in a DM, its player.
- **The knowledge library** (``engine.library.knowledge``): importing, removing and changing the
  options of setting files, in the server's library or the adventure here, is for those who may
  import scenarios; in a DM, the player's own. Anyone there may list them and read their text,
  except a narrator-only file's, which no command shows (``may_read_knowledge``).
- **A character** (``engine.story.characters``): anyone in the adventure's place sets their own;
  nobody, host and managers included, sets another player's. Anyone there may read them.
- **The party** (``engine.people.party``): anyone in a server adventure's place joins or leaves it
  (the host hands the adventure on first); a kicked player does not join. The host and those
  members close it (``/host party``): then only its players act or make characters, and
  nobody joins; the others watch. It never binds those who may close it.
- **A model of one's own** (``/model``, ``engine.llm.model_choice``): in a server, members who
  manage the server choose the model its adventures use; in a DM, the player chooses the model
  their own adventures use. Anyone may ask which model is used; a key is never shown to anyone.
- **The operator** (the bot's owner in Discord, and ``CAMPFIRE_OPERATOR_IDS``) alone reads
  ``/operator status`` and blocks or unblocks users and servers. A blocked user, or anyone in a
  blocked server, is refused every command and button (``check_not_blocked``); the operator
  never is.
- **In a DM** the player owns the story: server permissions mean nothing there, and the
  adventure's owner (its host) may do all of the above.

The rules are ``engine.people.access.rules`` (pure: who may, from the actor and the rows) and
``engine.people.access.checks`` (the refusals, and the reads they need): this package is the one
place that decides a right; import from those two modules.
"""
