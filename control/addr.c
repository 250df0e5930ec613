/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Addresses and names as the manager reads and writes them: IPv4 in host
 * byte order and as dotted quads; the names of switches, hosts, tenants
 * and jobs.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "mgr.h"

void mgr_ip_str(uint32_t ip, char buf[16])
{
	snprintf(buf, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

int mgr_parse_ip(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	*out = ntohl(a.s_addr);
	return *out == 0 || *out == 0xffffffffu ? -1 : 0;
}

bool mgr_valid_name(const char *s)
{
	if (!s || !*s || strlen(s) >= MGR_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}
