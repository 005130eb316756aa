/* Host checks shared by the two XTS backends (device/xts.h). */
#include "device/xts.h"

#include <errno.h>

#include "base/error.h"

int vc_xts_check(const struct vc_xts_key *key, uint32_t page_size)
{
	if (!key)
		return vc_err(-EINVAL, "XTS: no key");
	if (page_size < VC_XTS_UNIT_MIN || page_size > VC_XTS_UNIT_MAX ||
	    (page_size & (page_size - 1)) != 0)
		return vc_err(-EINVAL, "XTS: page size %u is not a power of two in %u..%u bytes",
			      page_size, VC_XTS_UNIT_MIN, VC_XTS_UNIT_MAX);
	/* Every byte compared, whatever the key: no early exit that times it. */
	unsigned diff = 0;
	for (int i = 0; i < VC_XTS_KEY_BYTES / 2; i++)
		diff |= (unsigned)(key->bytes[i] ^ key->bytes[i + VC_XTS_KEY_BYTES / 2]);
	if (diff == 0)
		return vc_err(-EINVAL, "XTS: the key's two halves are equal; the data key and the "
				       "tweak key must differ (IEEE 1619-2018, NIST SP 800-38E)");
	return 0;
}
