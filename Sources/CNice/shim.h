// libnice (Debian's libnice-dev) and the GLib it runs on; include paths come from pkg-config.
#include <agent.h>
