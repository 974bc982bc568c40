/*
 * task_state.c — a thread's state from /proc (task_state.h).
 */
#include "task_state.h"

#include <stdio.h>
#include <string.h>

/* Reads /proc/self/task/TID/NAME into buf (size > 1), "" if it cannot. */
static void task_file(int tid, const char *name, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, name);
    FILE *f = fopen(path, "re");
    size_t n = f != NULL ? fread(buf, 1, size - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
}

bool task_blocked(int tid, char *wchan, size_t size)
{
    char buf[512];
    task_file(tid, "stat", buf, sizeof buf);
    const char *end = strrchr(buf, ')'); /* the state follows "(comm) " */
    if (end == NULL || end[1] != ' ' || (end[2] != 'S' && end[2] != 'D'))
        return false;
    task_file(tid, "wchan", wchan, size);
    return true;
}
