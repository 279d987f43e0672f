#include "CTetherSCTP.h"
