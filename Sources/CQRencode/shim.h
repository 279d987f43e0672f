#ifndef TETHER_CQRENCODE_SHIM_H
#define TETHER_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
