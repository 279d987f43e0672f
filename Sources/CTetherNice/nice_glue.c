#include "CTetherNice.h"
#include <nice-version.h>

#define TETHER_STR2(x) #x
#define TETHER_STR(x) TETHER_STR2(x)

const char *tether_nice_version(void) {
    return TETHER_STR(NICE_VERSION_MAJOR) "." TETHER_STR(NICE_VERSION_MINOR) "." TETHER_STR(NICE_VERSION_MICRO);
}

static const char *const handlers_key = "tether-handlers";

static void on_new_candidate(NiceAgent *agent, NiceCandidate *candidate, gpointer data) {
    (void)agent;
    const TetherNiceHandlers *handlers = data;
    handlers->new_candidate(handlers->context, candidate);
}

static void on_gathering_done(NiceAgent *agent, guint stream_id, gpointer data) {
    (void)agent;
    const TetherNiceHandlers *handlers = data;
    handlers->gathering_done(handlers->context, stream_id);
}

static void on_state_changed(NiceAgent *agent, guint stream_id, guint component_id, guint state, gpointer data) {
    (void)agent;
    const TetherNiceHandlers *handlers = data;
    handlers->state_changed(handlers->context, stream_id, component_id, state);
}

static void on_selected_pair(NiceAgent *agent, guint stream_id, guint component_id, NiceCandidate *local,
                             NiceCandidate *remote, gpointer data) {
    (void)agent;
    const TetherNiceHandlers *handlers = data;
    handlers->selected_pair(handlers->context, stream_id, component_id, local, remote);
}

void tether_nice_connect(NiceAgent *agent, const TetherNiceHandlers *handlers) {
    TetherNiceHandlers *copy = g_memdup2(handlers, sizeof *handlers);
    // The agent owns the copy, so it outlives every connection made with it.
    g_object_set_data_full(G_OBJECT(agent), handlers_key, copy, g_free);
    g_signal_connect(agent, "new-candidate-full", G_CALLBACK(on_new_candidate), copy);
    g_signal_connect(agent, "candidate-gathering-done", G_CALLBACK(on_gathering_done), copy);
    g_signal_connect(agent, "component-state-changed", G_CALLBACK(on_state_changed), copy);
    g_signal_connect(agent, "new-selected-pair-full", G_CALLBACK(on_selected_pair), copy);
}

void tether_nice_disconnect(NiceAgent *agent) {
    gpointer copy = g_object_get_data(G_OBJECT(agent), handlers_key);
    if (copy == NULL) return;
    g_signal_handlers_disconnect_by_data(agent, copy);
    g_object_set_data(G_OBJECT(agent), handlers_key, NULL);
}

gboolean tether_nice_has_property(NiceAgent *agent, const char *name) {
    return g_object_class_find_property(G_OBJECT_GET_CLASS(agent), name) != NULL;
}

void tether_nice_set_boolean(NiceAgent *agent, const char *name, gboolean value) {
    g_object_set(G_OBJECT(agent), name, value, NULL);
}

gboolean tether_nice_get_boolean(NiceAgent *agent, const char *name) {
    gboolean value = FALSE;
    g_object_get(G_OBJECT(agent), name, &value, NULL);
    return value;
}

void tether_nice_set_uint(NiceAgent *agent, const char *name, guint value) {
    g_object_set(G_OBJECT(agent), name, value, NULL);
}

void tether_nice_set_string(NiceAgent *agent, const char *name, const char *value) {
    g_object_set(G_OBJECT(agent), name, value, NULL);
}

