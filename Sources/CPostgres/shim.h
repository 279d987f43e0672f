// libpq, PostgreSQL's client library (Debian: libpq-dev): the relay's and push relay's shared
// store when RELAY_DB / PUSH_DB is a postgres:// URL.
#include <libpq-fe.h>
