/* Sorted directory walk (see walk.h for the order, memory and safety rules). */
#include "walk.h"
#include "buf.h"
#include "error.h"
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wk_ent {
    const char *name; /* in the level's arena */
    size_t len;
    int isdir;        /* as seen at readdir time: decides the sort key only */
} wk_ent;

typedef struct wk_level {
    int fd;
    s3x_buf arena;    /* the names, each NUL-terminated */
    wk_ent *ents;
    size_t n, i;
    size_t path_len;  /* length of w->path up to and including this directory's '/' */
    uint64_t dev, ino;
} wk_level;

struct s3x_walk {
    int flags;
    wk_level *lv;
    size_t depth, cap;
    s3x_buf path;     /* root + '/' + the current relative path */
    size_t root_len;  /* where rel starts in path */
    char msg[512];
};

/* The byte at position i of the sort key (name, plus '/' for a directory),
 * or -1 past its end. */
static int key_at(const wk_ent *e, size_t i) {
    if (i < e->len) return (unsigned char)e->name[i];
    if (i == e->len && e->isdir) return '/';
    return -1;
}

/* arg: non-NULL for directory order (S3X_WALK_DIR_ORDER): names alone, so
 * a directory's entries come at its name's place. */
static int ent_cmp(const void *pa, const void *pb, void *arg) {
    const wk_ent *a = pa, *b = pb;
    if (arg) {
        size_t m = a->len < b->len ? a->len : b->len;
        int d = memcmp(a->name, b->name, m);
        return d ? d : a->len < b->len ? -1 : a->len > b->len;
    }
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->name, b->name, n);
    if (c) return c;
    /* One name is a prefix of the other: the next byte or two decide. */
    for (size_t i = n;; i++) {
        int ca = key_at(a, i), cb = key_at(b, i);
        if (ca != cb) return ca < cb ? -1 : 1;
        if (ca < 0) return 0;
    }
}

static void path_truncate(s3x_walk *w, size_t len) {
    w->path.len = len;
    w->path.data[len] = '\0';
}

static void level_free(wk_level *L) {
    if (L->fd >= 0) close(L->fd);
    s3x_buf_free(&L->arena);
    free(L->ents);
    memset(L, 0, sizeof *L);
    L->fd = -1;
}

static int is_dir_at(int dirfd, const char *name, int follow) {
    struct stat st;
    if (fstatat(dirfd, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) return 0;
    return S_ISDIR(st.st_mode);
}

/* Reads every name of the directory open as fd into L (fd is not consumed)
 * and sorts them. Returns 0, a positive errno when the directory cannot be
 * read, or S3X_ENOMEM. */
static int read_dir(s3x_walk *w, int fd, wk_level *L) {
    int follow = (w->flags & S3X_WALK_FOLLOW_SYMLINKS) != 0;
    /* fdopendir takes the descriptor it is given; the level keeps fd for
     * the fstatat/openat of its entries. */
    int dfd = dup(fd);
    if (dfd < 0) return errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int er = errno;
        close(dfd);
        return er;
    }
    size_t cap = 0, n = 0;
    size_t *offs = NULL;
    int *dirs = NULL;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno) rc = errno;
            break;
        }
        const char *nm = de->d_name;
        if (nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0'))) continue;
        int isdir;
        switch (de->d_type) {
        case DT_DIR: isdir = 1; break;
        case DT_LNK: isdir = follow ? is_dir_at(fd, nm, 1) : 0; break;
        case DT_UNKNOWN: isdir = is_dir_at(fd, nm, follow); break;
        default: isdir = 0; break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            size_t *no = realloc(offs, nc * sizeof *no);
            if (no) offs = no;
            int *nd = no ? realloc(dirs, nc * sizeof *nd) : NULL;
            if (nd) dirs = nd;
            if (!no || !nd) {
                rc = S3X_ENOMEM;
                break;
            }
            cap = nc;
        }
        offs[n] = L->arena.len;
        dirs[n] = isdir;
        if (s3x_buf_append(&L->arena, nm, strlen(nm) + 1) != 0) {
            rc = S3X_ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == 0 && n) {
        L->ents = malloc(n * sizeof *L->ents);
        if (!L->ents) rc = S3X_ENOMEM;
    }
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            L->ents[i].name = L->arena.data + offs[i];
            L->ents[i].len = strlen(L->ents[i].name);
            L->ents[i].isdir = dirs[i];
        }
        L->n = n;
        if (n > 1) qsort_r(L->ents, n, sizeof *L->ents, ent_cmp, (w->flags & S3X_WALK_DIR_ORDER) ? w : NULL);
    }
    free(offs);
    free(dirs);
    return rc;
}

/* Pushes the directory open as fd (consumed) whose path (with its trailing
 * '/') is w->path. Returns 0, a positive errno, or S3X_ENOMEM. */
static int push_level(s3x_walk *w, int fd, const struct stat *st) {
    if (w->depth == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 8;
        wk_level *nl = realloc(w->lv, nc * sizeof *nl);
        if (!nl) {
            close(fd);
            return S3X_ENOMEM;
        }
        w->lv = nl;
        w->cap = nc;
    }
    wk_level *L = &w->lv[w->depth];
    memset(L, 0, sizeof *L);
    L->fd = fd;
    L->path_len = w->path.len;
    L->dev = (uint64_t)st->st_dev;
    L->ino = (uint64_t)st->st_ino;
    int rc = read_dir(w, fd, L);
    if (rc != 0) {
        level_free(L);
        return rc;
    }
    w->depth++;
    return 0;
}

static void pop_level(s3x_walk *w) {
    level_free(&w->lv[--w->depth]);
}

static const char *kind_name(mode_t m) {
    if (S_ISFIFO(m)) return "FIFO";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    return "unknown file type";
}

int s3x_walk_open(s3x_walk **out, const char *root, int flags) {
    if (!out) return s3x_seterr(S3X_EINVAL, "s3x_walk_open: out is NULL");
    *out = NULL;
    if (!root || !*root) return s3x_seterr(S3X_EINVAL, "s3x_walk_open: no root directory given");
    if (flags & ~(S3X_WALK_FOLLOW_SYMLINKS | S3X_WALK_EMPTY_DIRS | S3X_WALK_DIR_ORDER))
        return s3x_seterr(S3X_EINVAL, "s3x_walk_open: unknown flags 0x%x", (unsigned)flags);
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int er = errno;
        if (er == ENOTDIR) return s3x_seterr(S3X_EINVAL, "%s is not a directory", root);
        return s3x_seterr_errno(S3X_EIO, er, "cannot open directory %s", root);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int er = errno;
        close(fd);
        return s3x_seterr_errno(S3X_EIO, er, "cannot stat directory %s", root);
    }
    s3x_walk *w = calloc(1, sizeof *w);
    if (!w) {
        close(fd);
        return s3x_seterr(S3X_ENOMEM, "out of memory starting a walk of %s", root);
    }
    w->flags = flags;
    size_t rl = strlen(root);
    int rc = s3x_buf_append(&w->path, root, rl);
    if (rc == 0 && root[rl - 1] != '/') rc = s3x_buf_append(&w->path, "/", 1);
    if (rc != 0) {
        close(fd);
        s3x_walk_close(w);
        return s3x_seterr(S3X_ENOMEM, "out of memory starting a walk of %s", root);
    }
    w->root_len = w->path.len;
    rc = push_level(w, fd, &st);
    if (rc != 0) {
        s3x_walk_close(w);
        if (rc == S3X_ENOMEM) return s3x_seterr(S3X_ENOMEM, "out of memory reading directory %s", root);
        return s3x_seterr_errno(S3X_EIO, rc, "cannot read directory %s", root);
    }
    *out = w;
    return 0;
}

/* Fills the common fields of an entry for the name just appended to w->path. */
static void entry_base(s3x_walk *w, const wk_level *L, const wk_ent *d, s3x_walk_entry *e) {
    memset(e, 0, sizeof *e);
    e->rel = w->path.data + w->root_len;
    e->rel_len = w->path.len - w->root_len;
    e->path = w->path.data;
    e->dirfd = L->fd;
    e->name = d->name;
}

static int entry_error(s3x_walk *w, s3x_walk_entry *e, int code, int sys_errno, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static int entry_error(s3x_walk *w, s3x_walk_entry *e, int code, int sys_errno, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    e->err = code;
    e->sys_errno = sys_errno;
    e->message = w->msg;
    return 1;
}

/* Appends '/' to the path of a directory entry so rel says what it is. */
static int dir_rel(s3x_walk *w, const wk_level *L, const wk_ent *d, s3x_walk_entry *e) {
    if (s3x_buf_append(&w->path, "/", 1) != 0) return S3X_ENOMEM;
    entry_base(w, L, d, e);
    e->is_dir = 1;
    return 0;
}

int s3x_walk_next(s3x_walk *w, s3x_walk_entry *e) {
    if (!w || !e) return s3x_seterr(S3X_EINVAL, "s3x_walk_next: NULL argument");
    int follow = (w->flags & S3X_WALK_FOLLOW_SYMLINKS) != 0;
    while (w->depth > 0) {
        wk_level *L = &w->lv[w->depth - 1];
        if (L->i == L->n) {
            pop_level(w);
            continue;
        }
        const wk_ent *d = &L->ents[L->i++];
        path_truncate(w, L->path_len);
        if (s3x_buf_append(&w->path, d->name, d->len) != 0) goto nomem;
        entry_base(w, L, d, e);
        struct stat st;
        if (fstatat(L->fd, d->name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) {
            int er = errno;
            struct stat lst;
            if (er == ELOOP)
                return entry_error(w, e, S3X_EIO, er, "symlink loop (too many levels of symbolic links)");
            if (er == ENOENT && follow && fstatat(L->fd, d->name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(lst.st_mode))
                return entry_error(w, e, S3X_EIO, er, "dangling symlink (its target does not exist)");
            if (er == ENOENT) return entry_error(w, e, S3X_EIO, er, "vanished during the walk");
            return entry_error(w, e, S3X_EIO, er, "cannot stat: %s", strerror(er));
        }
        if (S_ISLNK(st.st_mode)) {
            e->is_symlink = 1;
            return entry_error(w, e, S3X_EINVAL, 0, "symlink (not followed)");
        }
        if (S_ISREG(st.st_mode)) {
            e->size = (int64_t)st.st_size;
            e->mtime_sec = (int64_t)st.st_mtim.tv_sec;
            e->mtime_nsec = st.st_mtim.tv_nsec;
            e->dev = (uint64_t)st.st_dev;
            e->ino = (uint64_t)st.st_ino;
            return 1;
        }
        if (!S_ISDIR(st.st_mode))
            return entry_error(w, e, S3X_EINVAL, 0, "not a regular file (%s)", kind_name(st.st_mode));

        /* A directory: open it beneath its parent (not through a link
         * unless asked), then check it is not one of its own ancestors
         * (a followed link or a bind mount can make a loop). */
        int fd = openat(L->fd, d->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
        int er = errno;
        if (fd >= 0 && fstat(fd, &st) != 0) {
            er = errno;
            close(fd);
            fd = -1;
        }
        if (dir_rel(w, L, d, e) != 0) {
            if (fd >= 0) close(fd);
            goto nomem;
        }
        e->mtime_sec = (int64_t)st.st_mtim.tv_sec;
        e->mtime_nsec = st.st_mtim.tv_nsec;
        if (fd < 0) {
            if (er == ELOOP || er == ENOTDIR)
                return entry_error(w, e, S3X_EIO, er, "changed during the walk (no longer a directory)");
            return entry_error(w, e, S3X_EIO, er, "cannot open directory: %s", strerror(er));
        }
        for (size_t k = 0; k < w->depth; k++) {
            if (w->lv[k].dev == (uint64_t)st.st_dev && w->lv[k].ino == (uint64_t)st.st_ino) {
                close(fd);
                size_t alen = w->lv[k].path_len - w->root_len;
                return entry_error(w, e, S3X_EIO, ELOOP, "symlink loop: the same directory as %s%.*s",
                                   alen ? "" : "the root", (int)(alen > 400 ? 400 : alen),
                                   w->path.data + w->root_len);
            }
        }
        int rc = push_level(w, fd, &st);
        L = NULL; /* push_level may move the levels */
        if (rc == S3X_ENOMEM) goto nomem;
        if (rc != 0) return entry_error(w, e, S3X_EIO, rc, "cannot read directory: %s", strerror(rc));
        if (w->lv[w->depth - 1].n == 0) {
            pop_level(w);
            if (w->flags & S3X_WALK_EMPTY_DIRS) return 1;
        }
    }
    return 0;
nomem:
    while (w->depth > 0) pop_level(w);
    return s3x_seterr(S3X_ENOMEM, "out of memory walking %.*s", (int)w->root_len, w->path.data);
}

void s3x_walk_close(s3x_walk *w) {
    if (!w) return;
    while (w->depth > 0) pop_level(w);
    free(w->lv);
    s3x_buf_free(&w->path);
    free(w);
}
