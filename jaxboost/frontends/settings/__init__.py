"""Every setting of the front ends defined once (`settings_table`), with
its checks (`checks`) and the defaults measured at fit time."""
