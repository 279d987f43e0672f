#include "CTetherNice.h"
#include <nice-version.h>

#define TETHER_STR2(x) #x
#define TETHER_STR(x) TETHER_STR2(x)

const char *tether_nice_version(void) {
    return TETHER_STR(NICE_VERSION_MAJOR) "." TETHER_STR(NICE_VERSION_MINOR) "." TETHER_STR(NICE_VERSION_MICRO);
}
