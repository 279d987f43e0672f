#ifndef CTETHERNICE_H
#define CTETHERNICE_H
// libnice for Swift: ICE agents on a GLib main context. GObject's property setters and signal
// connections are variadic or macros, so the few calls Swift cannot make directly are wrapped
// here; everything else is driven from Swift through CNice.
#include <agent.h>

/// The libnice version this was built against, as "major.minor.micro" (for start-up lines).
const char *tether_nice_version(void);
#endif
