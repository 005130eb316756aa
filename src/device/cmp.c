/* Byte compares of block pairs: the check and the entry (device/cmp.h). */
#include "device/cmp.h"

#include <errno.h>

#include "base/error.h"
#include "device/device.h"
#include "device/xts.h"
#include "vramcache.h"

int vc_cmp_check(const struct vc_cmp_job *j)
{
	if (!j)
		return vc_err(-EINVAL, "compare: no job");
	if (j->len == 0 || j->len > VC_CMP_LEN_MAX)
		return vc_err(-EINVAL, "compare: length %u is not in 1..%u", j->len, VC_CMP_LEN_MAX);
	if (j->key) {
		if (j->len < VC_CMP_XTS_LEN_MIN || (j->len & (j->len - 1)) != 0)
			return vc_err(-EINVAL, "compare: length %u with a key is not a power of two from %u",
				      j->len, VC_CMP_XTS_LEN_MIN);
		const int r = vc_xts_check(j->key, j->len < VC_XTS_UNIT_MAX ? j->len : VC_XTS_UNIT_MAX);
		if (r < 0)
			return r;
	}
	if (j->n == 0)
		return 0;
	if (!j->pairs_dev || j->pairs_dev % 8 != 0)
		return vc_err(-EINVAL, "compare: pair array %#llx is absent or not 8-byte aligned",
			      (unsigned long long)j->pairs_dev);
	if (!j->out_dev)
		return vc_err(-EINVAL, "compare: no result array");
	if (j->key && (!j->tweaks_dev || j->tweaks_dev % 8 != 0))
		return vc_err(-EINVAL, "compare: tweak array %#llx is absent or not 8-byte aligned",
			      (unsigned long long)j->tweaks_dev);
	return 0;
}

int vc_cmp_start(struct vc_device *d, const struct vc_cmp_job *job)
{
	int r = vc_cmp_check(job);
	if (r < 0 || job->n == 0)
		return r;
	if (!d->ops->cmp_start)
		return vc_err(-VC_ENOTBUILT, "compare: backend %s has none", d->ops->name);
	return d->ops->cmp_start(d, job);
}

int vc_cmp_wait(struct vc_device *d)
{
	return d->ops->cmp_wait ? d->ops->cmp_wait(d) : 0;
}

int vc_cmp_run(struct vc_device *d, const struct vc_cmp_job *job)
{
	int r = vc_cmp_start(d, job);
	return r < 0 || job->n == 0 ? r : vc_cmp_wait(d);
}
