# lsmfs — build, test, mount.
#
#   make                 build everything into bin/
#   make test            build and run every test (unit, integration, crash;
#                        the integration tests once per FUSE transport offered)
#   make rados-test      only the RADOS tests (a throwaway Ceph cluster)
#   make test SAN=1      the same under AddressSanitizer + UBSan (build-asan/)
#   make test SAN=thread the same under ThreadSanitizer (build-tsan/)
#   make torture         the full I/O-error and out-of-memory sweeps, and the
#                        full-disk loop (50 rounds under two CPU hogs)
#   make mount / umount  mount the default store ./lsmfs-data at ./mnt
#   make install PREFIX=/usr/local  (mkfs.lsmfs, fsck.lsmfs and mount.lsmfs go
#                        to SBINDIR=/sbin, where mkfs/fsck/mount -t lsmfs find
#                        them; fstab entries use type lsmfs) / make uninstall
#   make format          clang-format the tree
#
# Every source file is picked up by wildcard: add a file to store/ and it is
# part of libstore; add tests/unit/test_foo.c and it is a test program.

CC      ?= cc
PREFIX  ?= /usr/local
SAN     ?=

ifeq ($(SAN),)
  BUILD   ?= build
  BIN     ?= bin
  OPT     := -O2
else ifeq ($(SAN),thread)
  BUILD   ?= build-tsan
  BIN     ?= $(BUILD)/bin
  OPT     := -O1 -fsanitize=thread
  SANLD   := -fsanitize=thread
  # Races TSan cannot see through uninstrumented Ceph code, by Ceph frame only.
  export TSAN_OPTIONS ?= suppressions=$(abspath tests/tsan_ceph.supp)
else
  BUILD   ?= build-asan
  BIN     ?= $(BUILD)/bin
  OPT     := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  SANLD   := -fsanitize=address,undefined
endif

# Check (and on Debian as root, install) the libraries we build against.
# Skipped for targets that need no compiler.
# The test-only packages only for goals that build or run tests.
NODEPS_GOALS := clean format umount uninstall
TEST_GOALS   := test unit-test integration-test rados-test torture %/tests/%
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
  DEPS_OK := $(shell tools/deps.sh $(if $(filter $(TEST_GOALS),$(MAKECMDGOALS)),test $(if $(filter thread,$(SAN)),tsan)) >&2 && echo ok)
  ifneq ($(DEPS_OK),ok)
    $(error missing build dependencies (see the message above))
  endif
endif

PKGS     := fuse3 liblz4 liburing
PKG_CF   := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
            $(shell pkg-config --cflags cmocka 2>/dev/null)
FUSE_LIB := $(shell pkg-config --libs fuse3 2>/dev/null)
URING_LIB := $(shell pkg-config --libs liburing 2>/dev/null)
LZ4_LIB  := $(shell pkg-config --libs liblz4 2>/dev/null)
CMOCKA   := $(shell pkg-config --libs cmocka 2>/dev/null)
# The store on Ceph RADOS (store/env_rados*.c); librados has no .pc file.
RADOS_LIB := -lrados

# LevelDB is optional: only lsmbench --engine=leveldb uses it.
HAVE_LEVELDB := $(shell test -f /usr/include/leveldb/c.h && echo 1)
ifeq ($(HAVE_LEVELDB),1)
  LEVELDB_CF  := -DHAVE_LEVELDB=1
  LEVELDB_LIB := -lleveldb
endif

CFLAGS  := -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -MMD -MP \
           -Istore -Ifs $(PKG_CF) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SANLD) $(EXTRA_LDFLAGS)

STORE_SRC := $(wildcard store/*.c)
FS_SRC    := $(filter-out fs/main.c,$(wildcard fs/*.c fs/transport/*.c))
STORE_OBJ := $(STORE_SRC:%.c=$(BUILD)/%.o)
FS_OBJ    := $(FS_SRC:%.c=$(BUILD)/%.o)
LIBSTORE  := $(BUILD)/libstore.a
LIBFS     := $(BUILD)/libfs.a
STORE_LIBS := $(LIBSTORE) $(LZ4_LIB) $(URING_LIB) $(RADOS_LIB)
# What only tests use (the fault env, the allocation-failure hook, fixtures):
# never in libstore; the tests (and bench-syncwake's slow disk) link it.
TESTSUP_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/support/*.c))
LIBTESTSUP  := $(BUILD)/libtestsupport.a
$(BUILD)/tests/%.o $(BUILD)/tools/bench_syncwake.o: CFLAGS += -Itests/support -Itests/unit
FS_LIBS    := $(LIBFS) $(LIBSTORE) $(FUSE_LIB) $(URING_LIB) $(LZ4_LIB) $(RADOS_LIB)

PROGS := $(BIN)/lsmfs $(BIN)/mkfs.lsmfs $(BIN)/fsck.lsmfs $(BIN)/lsmctl $(BIN)/mount.lsmfs \
         $(BIN)/lsmbench $(BIN)/nowork-fs $(BIN)/bench-syncwake $(BIN)/bench-radosops
ALL_UNIT    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
ALL_INTEG   := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(wildcard tests/integration/test_*.c))
# test_rados_* need the throwaway Ceph cluster tests/ceph/run.sh brings up.
RADOS_TESTS := $(filter $(BUILD)/tests/test_rados_%,$(ALL_UNIT) $(ALL_INTEG))
UNIT_TESTS  := $(filter-out $(RADOS_TESTS),$(ALL_UNIT))
INTEG_TESTS := $(filter-out $(RADOS_TESTS),$(ALL_INTEG))
# Store suites that also run over RADOS (testutil.h's tu_env).
RADOS_ALSO  := $(BUILD)/tests/test_db_group_sync $(BUILD)/tests/test_db_checkpoint \
               $(BUILD)/tests/test_db_recovery $(BUILD)/tests/test_db_backup \
               $(BUILD)/tests/test_io_sweep $(BUILD)/tests/test_db_wal_hold
INTEG_LIB   := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/integration/test_%,$(wildcard tests/integration/*.c)))

# Keep objects of chained rules (test programs) between runs.
.SECONDARY:

.PHONY: all test unit-test integration-test rados-test torture clean install uninstall format mount umount
all: $(PROGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBSTORE): $(STORE_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(LIBFS): $(FS_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(LIBTESTSUP): $(TESTSUP_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/lsmfs: $(BUILD)/fs/main.o $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(FS_LIBS)
$(BIN)/mkfs.lsmfs: $(BUILD)/mkfs/mkfs.o $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(FS_LIBS)
$(BIN)/fsck.lsmfs: $(BUILD)/mkfs/fsck.o $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(FS_LIBS)
$(BIN)/lsmctl: $(BUILD)/tools/lsmctl.o $(BUILD)/tools/lsmctl_snapshot.o $(BUILD)/tools/lsmctl_backup.o \
               $(BUILD)/tools/lsmctl_stats.o $(BUILD)/tools/lsmctl_info.o \
               $(BUILD)/tools/lsmctl_online.o $(BUILD)/tools/lsmctl_store.o $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(FS_LIBS)
# mount(8)'s helper, running the lsmfs beside it (installed: BINDIR's).
$(BIN)/mount.lsmfs: tools/mount.lsmfs.in
	@mkdir -p $(dir $@)
	sed 's|@BINDIR@|$(abspath $(BIN))|' $< > $@ && chmod 755 $@
$(BIN)/bench-syncwake: $(BUILD)/tools/bench_syncwake.o $(LIBTESTSUP) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBTESTSUP) $(STORE_LIBS)
$(BIN)/bench-radosops: $(BUILD)/tools/bench_radosops.o $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(STORE_LIBS)
# nowork-fs shares lsmfs's transport (fs/transport/) and nothing else.
$(BIN)/nowork-fs: $(BUILD)/tools/nowork_fs.o $(BUILD)/tools/nowork_log.o \
                  $(patsubst %.c,$(BUILD)/%.o,$(wildcard fs/transport/*.c))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(FUSE_LIB) $(URING_LIB)

$(BUILD)/tools/lsmbench_leveldb.o: CFLAGS += $(LEVELDB_CF)
$(BIN)/lsmbench: $(BUILD)/tools/lsmbench.o $(BUILD)/tools/lsmbench_leveldb.o $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(STORE_LIBS) $(LEVELDB_LIB)

# Unit tests of fs/ modules (test_fs_*) link libfs; the store's only libstore;
# nowork-fs's log its own object.
$(BUILD)/tests/test_nowork_log: $(BUILD)/tests/unit/test_nowork_log.o $(BUILD)/tools/nowork_log.o $(LIBTESTSUP) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBTESTSUP) $(STORE_LIBS) $(CMOCKA)
$(BUILD)/tests/test_fs_%: $(BUILD)/tests/unit/test_fs_%.o $(LIBTESTSUP) $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBTESTSUP) $(FS_LIBS) $(CMOCKA)
$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(LIBTESTSUP) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBTESTSUP) $(STORE_LIBS) $(CMOCKA)
$(BUILD)/tests/test_%: $(BUILD)/tests/integration/test_%.o $(INTEG_LIB) $(LIBFS) $(LIBSTORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(INTEG_LIB) $(FS_LIBS) $(CMOCKA)

# The LD_PRELOAD shims tests put under a program (tests/shim/: syncs that
# fail on demand, RADOS calls cut): plain flags, whatever SAN
# is, since they are loaded into other programs.
$(BUILD)/tests/lib%.so: tests/shim/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl
$(BUILD)/tests/test_failsync: $(BUILD)/tests/libfailsync.so
$(BUILD)/tests/test_rados_mkfs: $(BUILD)/tests/libradoscrash.so

# Test programs run one after another (integration tests mount FUSE
# filesystems and must not fight over the two CPUs), each under a timeout.
# The integration tests run once per transport the kernel offers (/dev/fuse,
# and io_uring when the fuse module's enable_uring is Y), saying which.
# store/ and fs/ allocate only through lsm_malloc.h (the seam the OOM tests fail).
ALLOC_GUARD := tests/alloc_guard.sh $(STORE_OBJ) $(FS_OBJ) $(BUILD)/fs/main.o
test: all $(UNIT_TESTS) $(INTEG_TESTS) $(RADOS_TESTS)
	@$(ALLOC_GUARD)
	@tests/run.sh $(UNIT_TESTS)
	@LSMFS_BIN=$(abspath $(BIN)) tests/run_transports.sh $(INTEG_TESTS)
	@LSMFS_BIN=$(abspath $(BIN)) tests/ceph/run.sh $(RADOS_TESTS) -- $(RADOS_ALSO)
rados-test: all $(RADOS_TESTS) $(RADOS_ALSO)
	@LSMFS_BIN=$(abspath $(BIN)) tests/ceph/run.sh $(RADOS_TESTS) -- $(RADOS_ALSO)
unit-test: $(UNIT_TESTS) $(STORE_OBJ) $(FS_OBJ) $(BUILD)/fs/main.o
	@$(ALLOC_GUARD)
	@tests/run.sh $(UNIT_TESTS)
integration-test: all $(INTEG_TESTS)
	@LSMFS_BIN=$(abspath $(BIN)) tests/run_transports.sh $(INTEG_TESTS)
# The full sweeps: every env call of its workload failed in every fault
# kind, every allocation of its workload failed (make test runs samples).
torture: $(BUILD)/tests/test_io_sweep $(BUILD)/tests/test_oom_sweep $(BUILD)/tests/test_fs_oom \
         $(BUILD)/tests/test_oom_manage $(BUILD)/tests/test_fullfs all
	@IO_SWEEP=full OOM_SWEEP=full TEST_TIMEOUT=3600 tests/run.sh $(BUILD)/tests/test_io_sweep \
	  $(BUILD)/tests/test_oom_sweep $(BUILD)/tests/test_fs_oom $(BUILD)/tests/test_oom_manage
	@FULLFS_ROUNDS=50 FULLFS_HOGS=2 TEST_TIMEOUT=1800 LSMFS_BIN=$(abspath $(BIN)) tests/run.sh $(BUILD)/tests/test_fullfs

STORE_DIR ?= lsmfs-data
MOUNT_DIR ?= mnt
mount: all
	@tools/mount.sh $(BIN) $(STORE_DIR) $(MOUNT_DIR)
umount:
	@if grep -qs " $(abspath $(MOUNT_DIR)) " /proc/mounts; then \
	  fusermount3 -u $(MOUNT_DIR) && echo "unmounted $(MOUNT_DIR)"; \
	else echo "$(MOUNT_DIR) is not mounted"; fi

# make install [PREFIX=/usr/local] [DESTDIR=] [NOBUILD=1: install bin/ as built]
# lsmfs and lsmctl go to BINDIR, the man pages to MANDIR; mkfs.lsmfs,
# fsck.lsmfs and mount.lsmfs to SBINDIR, /sbin by default: mkfs(8), fsck(8)
# and mount(8) look for their -t helpers there (and in /sbin/fs.d, /sbin/fs)
# whatever PREFIX is; SBINDIR=$(PREFIX)/sbin keeps all under PREFIX. No
# benchmark is installed. make uninstall removes exactly these files.
BINDIR  ?= $(PREFIX)/bin
SBINDIR ?= /sbin
MANDIR  ?= $(PREFIX)/share/man/man8
INSTALLED := $(BINDIR)/lsmfs $(BINDIR)/lsmctl $(SBINDIR)/mkfs.lsmfs $(SBINDIR)/fsck.lsmfs \
             $(SBINDIR)/mount.lsmfs $(patsubst docs/%,$(MANDIR)/%,$(wildcard docs/*.8))
install: $(if $(NOBUILD),,all)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)
	install -m 755 $(BIN)/lsmfs $(BIN)/lsmctl $(DESTDIR)$(BINDIR)/
	install -m 755 $(BIN)/mkfs.lsmfs $(BIN)/fsck.lsmfs $(DESTDIR)$(SBINDIR)/
	sed 's|@BINDIR@|$(BINDIR)|' tools/mount.lsmfs.in > $(DESTDIR)$(SBINDIR)/mount.lsmfs
	chmod 755 $(DESTDIR)$(SBINDIR)/mount.lsmfs
	install -m 644 docs/*.8 $(DESTDIR)$(MANDIR)/
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

format:
	clang-format -i $(wildcard store/*.[ch] fs/*.[ch] fs/transport/*.[ch] mkfs/*.[ch] tools/*.[ch] tests/*/*.[ch])

clean:
	rm -rf build build-asan build-tsan bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
