#ifndef CTETHERNICE_H
#define CTETHERNICE_H
// libnice for Swift: ICE agents on a GLib main context. GObject's property setters and signal
// connections are variadic or macros, so the few calls Swift cannot make directly are wrapped
// here; everything else is driven from Swift through CNice.
#include <agent.h>

/// The libnice version this was built against, as "major.minor.micro" (for start-up lines).
const char *tether_nice_version(void);

/// The agent signals an ICE agent needs, as plain C callbacks with one context pointer. libnice
/// emits them on the thread iterating the agent's main context (or inside the agent call that
/// caused them, made on that same thread), so the context is only ever touched there.
typedef struct TetherNiceHandlers {
    void *context;
    void (*new_candidate)(void *context, NiceCandidate *candidate);
    void (*gathering_done)(void *context, guint stream_id);
    void (*state_changed)(void *context, guint stream_id, guint component_id, guint state);
    void (*selected_pair)(void *context, guint stream_id, guint component_id, NiceCandidate *local, NiceCandidate *remote);
} TetherNiceHandlers;

/// Connects `handlers` (copied; the copy lives as long as the agent or until
/// `tether_nice_disconnect`) to new-candidate-full, candidate-gathering-done,
/// component-state-changed and new-selected-pair-full.
void tether_nice_connect(NiceAgent *agent, const TetherNiceHandlers *handlers);

/// Disconnects every handler `tether_nice_connect` installed: after it returns, none of them
/// runs again, whatever the agent still does while it is being disposed.
void tether_nice_disconnect(NiceAgent *agent);

/// Whether the agent class has a property of this name (libnice grows them between releases).
gboolean tether_nice_has_property(NiceAgent *agent, const char *name);

void tether_nice_set_boolean(NiceAgent *agent, const char *name, gboolean value);
gboolean tether_nice_get_boolean(NiceAgent *agent, const char *name);
void tether_nice_set_uint(NiceAgent *agent, const char *name, guint value);
void tether_nice_set_string(NiceAgent *agent, const char *name, const char *value);

#endif
